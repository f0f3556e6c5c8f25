//! `carver completions SHELL`: a tab-completion script for the shell, on standard output.

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Where each shell looks for the script; shown by `carver completions --help`.
const INSTALL: &str = "\
Install (then open a new shell):
  bash:  carver completions bash > ~/.local/share/bash-completion/completions/carver
  zsh:   carver completions zsh > ~/.zfunc/_carver
         (with `fpath+=~/.zfunc; autoload -Uz compinit; compinit` in ~/.zshrc)
  fish:  carver completions fish > ~/.config/fish/completions/carver.fish
  elvish, powershell: source the output from the shell's startup file";

#[derive(Debug, Args)]
#[command(after_help = INSTALL)]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::Cli::command();
    // The binary's name, not argv[0]: the script must complete `carver` however it was run.
    clap_complete::generate(args.shell, &mut command, "carver", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
