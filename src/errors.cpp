// The runtime's one failure writer and one file opener (errors.h).
#include "errors.h"

#include "status.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvg {

std::string strfmt(const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

bool fail(std::string * err, const std::string & msg) {
    if (err) *err = msg;
    return false;
}

bool fail(std::string * err, kvg_status status, const std::string & msg) {
    note_status(status);
    return fail(err, msg);
}

// O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever.
int open_regular(const std::string & path, std::string * err) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fail(err, KVG_STATUS_IO, strfmt("cannot open '%s': %s", path.c_str(), strerror(errno)));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(err, KVG_STATUS_IO, strfmt("'%s' is not a regular file", path.c_str()));
        return -1;
    }
    return fd;
}

} // namespace kvg
