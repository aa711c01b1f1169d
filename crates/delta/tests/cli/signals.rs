//! (tests to be written)
