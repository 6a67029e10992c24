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

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
