//! Mermaid `stateDiagram-v2` output (work in progress).
