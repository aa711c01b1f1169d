//! The `delta` binary: a thin entry point; everything happens in [`cli`].

mod cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // First, before any thread starts: the API keys out of the environment the kernel shows in
    // /proc, and no tracing or reading of this process's memory by the programs it confines.
    delta::env::take_secrets_from_process();
    delta::sandbox::protect_this_process();
    cli::main()
}
