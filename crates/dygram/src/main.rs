//! The `dygram` binary: a thin entry point; everything happens in [`cli`].

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
