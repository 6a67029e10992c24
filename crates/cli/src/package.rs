//! What a package ships beside the binary, generated from the same clap definition as the
//! command line itself so they cannot drift: shell completions (`sluice completions SHELL`) and
//! manual pages (`sluice man`). `examples/systemd/sluice.service` and the Debian package
//! (`cargo deb -p sluice`, `[package.metadata.deb]` in this crate's Cargo.toml) use them;
//! docs/packaging.md explains the whole.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Command};
use clap_complete::Shell;
use sluice_server::ops::lifecycle::fail;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// Write `sluice.1` and one page per command (`sluice-serve.1`, ...) into this directory
    /// instead of printing `sluice.1` to standard output.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Print the completion script for `args.shell` to standard output.
pub fn completions(args: &CompletionsArgs, mut command: Command) -> ExitCode {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut command, "sluice", &mut out);
    match out.flush() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("writing the completion script: {e}")),
    }
}

/// Print `sluice.1`, or write every page into `--out-dir`.
pub fn man(args: &ManArgs, command: Command) -> ExitCode {
    let command = command.version(env!("CARGO_PKG_VERSION"));
    match &args.out_dir {
        None => {
            let mut page = Vec::new();
            if let Err(e) = clap_mangen::Man::new(command).render(&mut page) {
                return fail(&format!("rendering the manual page: {e}"));
            }
            let mut out = std::io::stdout().lock();
            match out.write_all(&page).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&format!("writing the manual page: {e}")),
            }
        }
        Some(dir) => match write_pages(command, dir) {
            Ok(written) => {
                for path in written {
                    println!("{}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&format!("writing manual pages into {}: {e}", dir.display())),
        },
    }
}

/// `sluice.1` and `sluice-COMMAND.1` for each command (nested ones as `sluice-bench-run.1`), the
/// layout git and cargo use, so `man sluice-serve` works. After `build`, clap gives every
/// subcommand its display name (`sluice-bench-run`, the page's title) and its bin name
/// (`sluice bench run`, the synopsis).
fn write_pages(mut command: Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    command.build();
    let mut written = Vec::new();
    write_page(&command, dir, &mut written)?;
    Ok(written)
}

fn write_page(command: &Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let path = dir.join(format!("{name}.1"));
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut bytes)?;
    std::fs::write(&path, bytes)?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        write_page(sub, dir, written)?;
    }
    Ok(())
}
