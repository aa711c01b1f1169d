//! An execution drawn on its machine: the nodes its paths visited, where they stand now and the
//! transitions they took, as Graphviz DOT, SVG or Mermaid ([`to_dot`], [`to_svg`],
//! [`to_mermaid`]), and a self-contained HTML page with the drawing, the paths and a timeline of
//! the calls ([`html`]).

pub mod html;

use crate::state::ExecutionState;

use super::svg::SvgError;
use dygram_core::render::{dot, mermaid};

/// What an execution did on its machine, for the drawings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Nodes visited, in first-seen order over every path.
    pub visited: Vec<String>,
    /// Where the paths that can still go on stand.
    pub current: Vec<String>,
    /// Transitions taken (from, to), in order, over every path.
    pub taken: Vec<(String, String)>,
}

impl Trace {
    /// The trace of an execution.
    pub fn of(state: &ExecutionState) -> Self {
        let mut visited: Vec<String> = Vec::new();
        let mut taken = Vec::new();
        let mut visit = |n: &String| {
            if !visited.contains(n) {
                visited.push(n.clone());
            }
        };
        for p in &state.paths {
            for t in &p.history {
                visit(&t.from);
                visit(&t.to);
                taken.push((t.from.clone(), t.to.clone()));
            }
            visit(&p.current_node);
        }
        if visited.is_empty() {
            visited = state.visited_nodes();
        }
        Self {
            visited,
            current: state.current_nodes(),
            taken,
        }
    }
}

/// Graphviz DOT of the execution's machine with its trace drawn on it (ends with a newline).
pub fn to_dot(state: &ExecutionState) -> String {
    let trace = Trace::of(state);
    let mut text = dot::to_dot_highlighted(
        &state.machine_snapshot,
        &trace.visited,
        &trace.current,
        &trace.taken,
    );
    text.push('\n');
    text
}

/// A Mermaid state diagram of the execution's machine with the visited and current nodes marked.
pub fn to_mermaid(state: &ExecutionState) -> String {
    let trace = Trace::of(state);
    mermaid::to_mermaid_highlighted(&state.machine_snapshot, &trace.visited, &trace.current)
}

/// SVG of [`to_dot`], laid out by Graphviz's `dot`.
pub fn to_svg(state: &ExecutionState) -> Result<String, SvgError> {
    super::svg::to_svg(&to_dot(state))
}
