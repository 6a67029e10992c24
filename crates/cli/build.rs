//! Link the `sluice` binary with packed relative relocations (`DT_RELR`) on Linux with glibc.
//!
//! A position-independent executable carries one 24-byte `R_X86_64_RELATIVE` entry per pointer
//! in its data (vtables, string tables): about 590 KiB of `.rela.dyn` here, which the dynamic
//! loader reads in full at start-up, so every process kept those pages resident. `DT_RELR`
//! stores the same relocations as bitmaps, a few KiB. It needs binutils ≥ 2.38 and glibc ≥ 2.36
//! (Debian 12 has both); the linker then records a dependency on glibc's `GLIBC_ABI_DT_RELR`
//! version, so a glibc without it refuses to start the binary instead of misreading it. Only
//! the binary: the library and test executables are linked as before. Measured in
//! `docs/performance.md`, "Memory".
//!
//! Both versions are asked of the build machine (`getconf GNU_LIBC_VERSION`, `cc -Wl,--version`);
//! when either is older or cannot be read, the binary is linked as before rather than failing to
//! link or to start (Ubuntu 22.04, say, has binutils 2.38 but glibc 2.35).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let glibc = version_after(&output("getconf", &["GNU_LIBC_VERSION"]), "glibc ");
    let binutils = version_after(&output("cc", &["-Wl,--version"]), "GNU ld ");
    let supported = glibc.is_some_and(|v| v >= (2, 36)) && binutils.is_some_and(|v| v >= (2, 38));
    if os == "linux" && env == "gnu" && supported {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// What `program args` printed, or nothing if it could not run.
fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

/// `(major, minor)` of the last `N.M` on the first line that starts with `prefix`
/// (`glibc 2.36`, `GNU ld (GNU Binutils for Debian) 2.40`).
fn version_after(text: &str, prefix: &str) -> Option<(u32, u32)> {
    let line = text.lines().find(|line| line.starts_with(prefix))?;
    let word = line.split_whitespace().last()?;
    let mut parts = word.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}
