//! The `boyd` binary: parse the command line, set up tracing, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

/// Count heap bytes so `boyd validate` can measure weights, KV cache and compute buffers on
/// the CPU (relaxed atomics on top of the system allocator; see `boyd::measure::alloc`).
#[global_allocator]
static ALLOC: boyd::measure::alloc::CountingAlloc = boyd::measure::alloc::CountingAlloc;

fn main() -> ExitCode {
    // The shell sandbox's launcher (hidden): restrict this process, then exec the program.
    // Dispatched before anything else so the process is still single-threaded.
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|a| a == boyd::agent::tools::jail::LAUNCHER_ARG)
    {
        let code = boyd::agent::tools::jail::launcher_main(args.collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = boyd::cli::Cli::parse();
    boyd::cli::init_tracing(cli.verbose);
    match boyd::cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
