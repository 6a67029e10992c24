//! `sluice precompress DIR`: writes the `.gz` / `.br` / `.zst` sidecars that static routes
//! with `precompressed` serve (`sidecars.rs` walks and compresses).

mod sidecars;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_core::SidecarCoding;
use sluice_server::ops::lifecycle::fail;

#[derive(Args)]
pub struct PrecompressArgs {
    /// Directory to walk (symbolic links are not followed).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Codings to write, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "gzip,br,zstd", value_parser = sidecar_coding())]
    pub algorithms: Vec<SidecarCoding>,
    /// `max` (gzip 9, br 11, zstd 19) or a number, clamped into each coding's range.
    #[arg(long, default_value = "max", value_parser = parse_level)]
    pub level: LevelArg,
    /// Files smaller than this many bytes are left alone.
    #[arg(long, value_name = "BYTES", default_value_t = 256)]
    pub min_size: u64,
    /// Remove the .gz/.br/.zst files of the compressible files instead of writing them.
    #[arg(long)]
    pub clean: bool,
    /// Files compressed in parallel (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
}

#[derive(Clone, Copy)]
pub enum LevelArg {
    Max,
    Fixed(i32),
}

/// A sidecar coding by its token, exactly as clap's value enums take them (lower case), listed in
/// the order `sluice precompress` writes and reports them.
fn sidecar_coding() -> impl clap::builder::TypedValueParser<Value = SidecarCoding> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let tokens = sidecars::ALGORITHMS.map(SidecarCoding::as_str);
    PossibleValuesParser::new(tokens).try_map(|token| {
        sidecars::ALGORITHMS
            .into_iter()
            .find(|coding| coding.as_str() == token)
            .ok_or("not a sidecar coding")
    })
}

fn parse_level(text: &str) -> Result<LevelArg, String> {
    if text == "max" {
        return Ok(LevelArg::Max);
    }
    text.parse()
        .map(LevelArg::Fixed)
        .map_err(|_| format!("expected `max` or a number, found `{text}`"))
}

pub fn run(args: PrecompressArgs) -> ExitCode {
    let mut algorithms = Vec::new();
    for coding in args.algorithms {
        if !algorithms.contains(&coding) {
            algorithms.push(coding);
        }
    }
    let options = sidecars::Options {
        dir: args.dir,
        algorithms,
        level: match args.level {
            LevelArg::Max => None,
            LevelArg::Fixed(level) => Some(level),
        },
        min_size: args.min_size,
        clean: args.clean,
        jobs: args.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
        progress: true,
    };
    match sidecars::run(&options) {
        Ok(summary) => {
            print!("{}", summary.render(&options));
            if summary.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => fail(&message),
    }
}
