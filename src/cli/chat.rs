//! `boyd chat`: an interactive conversation that keeps the KV cache between turns.

use std::io::{BufRead, Write};

use super::generate::{load_model, summary, SamplingArgs};
use super::GlobalOpts;
use crate::catalog;
use crate::lm::{CancelToken, ChatMessage, GenRequest, LanguageModel, Role};

/// Arguments of `boyd chat`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// System message.
    #[arg(long)]
    pub system: Option<String>,
    /// Sampling.
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Run `boyd chat`: read a line, answer it, repeat. `/reset` clears the history, `/exit` or
/// end of input quits.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    let (mut model, resolved) = load_model(g, catalog::AGENT_DEFAULT_MODEL, args.sampling.ctx)?;
    eprintln!(
        "boyd chat · {} ({}) · /reset clears the conversation, /exit quits",
        model.name(),
        resolved.path.display()
    );
    let base: Vec<ChatMessage> = args
        .system
        .iter()
        .map(|s| ChatMessage::new(Role::System, s.clone()))
        .collect();
    let mut messages = base.clone();
    let stdin = std::io::stdin();
    let mut line = String::new();
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    loop {
        cancel.reset();
        eprint!("> ");
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let input = line.trim();
        match input {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                messages = base.clone();
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        messages.push(ChatMessage::new(Role::User, input.to_string()));
        let req = GenRequest {
            messages: messages.clone(),
            sampling: args.sampling.params(),
            max_tokens: args.sampling.max_tokens,
            stop: vec![],
            constraint: None,
        };
        let mut stdout = std::io::stdout().lock();
        let out = model.generate(
            &req,
            &mut |piece| {
                let _ = stdout.write_all(piece.as_bytes());
                let _ = stdout.flush();
            },
            &cancel,
        );
        writeln!(stdout)?;
        match out {
            Ok(out) => {
                eprintln!("[{}]", summary(&out.usage));
                messages.push(ChatMessage::new(Role::Assistant, out.text));
            }
            Err(e) => {
                eprintln!("error: {e}");
                messages.pop();
            }
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
