//! Graphviz DOT output (work in progress).
