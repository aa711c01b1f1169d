//! Why a completed run has no final answer.

/// Why a COMPLETED run has no final answer from the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The iteration budget of this process was spent while the model was still calling tools.
    MaxIterations {
        /// The budget.
        limit: u32,
    },
    /// The model's last answer had no tool calls and no text.
    EmptyAnswer,
    /// A tool of the program running the engine handed the work back to it (a state machine's
    /// transition taken by an agent node): the tool's result is the final answer.
    Handoff,
}

impl EndReason {
    /// The name in results (`reason`): `max_iterations` or `empty_answer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxIterations { .. } => "max_iterations",
            Self::EmptyAnswer => "empty_answer",
            Self::Handoff => "handoff",
        }
    }

    /// A sentence for people.
    pub fn describe(self) -> String {
        match self {
            Self::MaxIterations { limit } => {
                format!("stopped at its iteration limit ({limit}) before a final answer")
            }
            Self::EmptyAnswer => "the model's final answer was empty".into(),
            Self::Handoff => "a tool of the program running it handed the work back".into(),
        }
    }
}
