// Looking at a graph's edges in tests: a tensor's control edges to another, a node's position.
#pragma once

#include "ggml.h"

// kind of the control edge t -> dep, or -1 if there is none
inline int dep_kind(const ggml_tensor * t, const ggml_tensor * dep) {
    for (int i = 0; i < ggml_n_control_deps(t); ++i) {
        ggml_dep_kind kind;
        if (ggml_get_control_dep(t, i, &kind) == dep) return (int) kind;
    }
    return -1;
}

// Does t have a control edge of this kind to dep (among all its edges to dep)?
inline bool has_dep(const ggml_tensor * t, const ggml_tensor * dep, ggml_dep_kind want) {
    for (int i = 0; i < ggml_n_control_deps(t); ++i) {
        ggml_dep_kind kind;
        if (ggml_get_control_dep(t, i, &kind) == dep && kind == want) return true;
    }
    return false;
}

// Position of t in the graph's node list, -1 if absent.
inline int node_index(ggml_cgraph * gf, const ggml_tensor * t) {
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        if (ggml_graph_node(gf, i) == t) return i;
    }
    return -1;
}
