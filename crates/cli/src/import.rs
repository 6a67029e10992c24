//! `sluice import nginx.conf [-o sluice.toml]`: nginx configuration → a commented sluice
//! configuration (the `sluice-import` crate does the work; docs/import.md says what
//! translates). Exit status: 0 everything translated, 1 something was left out (listed on
//! stderr and at the top of the output), 2 the nginx configuration cannot be read (syntax,
//! a missing include, an include loop; nothing is written), 3 the output was written but
//! `sluice check` refuses it (a file it names is missing here, say; the errors are printed).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// The exit statuses, a contract with scripts (docs/import.md).
pub const EXIT_LEFT_OUT: u8 = 1;
pub const EXIT_UNREADABLE: u8 = 2;
pub const EXIT_INVALID: u8 = 3;

#[derive(Args)]
pub struct ImportArgs {
    /// The nginx configuration file (its includes are read too).
    #[arg(value_name = "NGINX_CONF")]
    pub nginx_conf: PathBuf,
    /// Where to write the sluice configuration; standard output when not given.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// nginx's prefix, which relative paths in the configuration start from (nginx -p);
    /// by default the directory of NGINX_CONF.
    #[arg(short, long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
}

pub fn run(args: &ImportArgs) -> ExitCode {
    let options = sluice_import::Options {
        prefix: args.prefix.clone(),
        map: Vec::new(),
        output: args.output.clone(),
    };
    let imported = match sluice_import::import(&args.nginx_conf, &options) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: cannot read the nginx configuration: {e}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &imported.toml) {
                eprintln!("error: writing {}: {e}", path.display());
                return ExitCode::from(EXIT_UNREADABLE);
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(imported.toml.as_bytes());
        }
    }
    let mut err = std::io::stderr().lock();
    for l in &imported.left_out {
        let _ = writeln!(
            err,
            "not translated: {}: {}: {}",
            l.place, l.directive, l.why
        );
    }
    if let Err(diagnostics) = &imported.check {
        let _ = writeln!(
            err,
            "{diagnostics}\nerror: sluice check refuses the imported configuration (above); fix \
             it by hand"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    if imported.left_out.is_empty() {
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(
            err,
            "{} directive(s) not translated (listed above and at the top of the output)",
            imported.left_out.len()
        );
        ExitCode::from(EXIT_LEFT_OUT)
    }
}
