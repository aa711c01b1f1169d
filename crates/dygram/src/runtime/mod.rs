//! Executing machines: state, steps, turns, tools, conditions.

pub mod condition;
pub mod executor;
pub mod js;
pub mod machine;
pub mod prompt;
pub mod state;
pub mod tools;
