//! The DSL back-compiler: canonical JSON back to `.dy` source (work in progress).
