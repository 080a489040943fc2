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
    let first = args.nth(1);
    if first
        .as_ref()
        .is_some_and(|a| a == boyd::agent::tools::jail::LAUNCHER_ARG)
    {
        let code = boyd::agent::tools::jail::launcher_main(args.collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // A chat template's rendering process (hidden): see `boyd::runtime::template_process`.
    if first
        .as_ref()
        .is_some_and(|a| a == boyd::runtime::template_process::RENDER_ARG)
    {
        let code = boyd::runtime::template_process::helper_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // Every chat template this run renders is rendered by a child of this binary, so a
    // template that exhausts memory fails its render instead of ending boyd.
    if let Ok(exe) = std::env::current_exe() {
        boyd::runtime::template_process::use_helper(exe);
    }
    let cli = boyd::cli::Cli::parse();
    if cli.command.only_prints() {
        end_quietly_on_a_closed_pipe();
    }
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

/// Let a closed stdout end the process quietly (`boyd runs show ID | head`) instead of a
/// panic report: Rust starts with SIGPIPE ignored, so a write to a closed pipe is an error,
/// and the print macros panic on it. A panic for any other reason is reported as before.
fn end_quietly_on_a_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            // What a process killed by SIGPIPE reports to its shell (128 + 13).
            std::process::exit(141);
        }
        report(info);
    }));
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
