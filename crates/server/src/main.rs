//! The `sluice` binary: see `sluice --help`.
//!
//! The allocator is mimalloc rather than glibc's malloc. A proxied 340 KB response passes
//! through buffers of up to a few hundred KB that are freed as soon as the client has them;
//! glibc gave that memory back to the kernel (heap trimming) and faulted it in again, zeroed, for
//! the next response: 13 page faults per request, and the copies from the kernel went to cold
//! pages. mimalloc keeps freed pages for reuse: 0.7 page faults per request and 15–20% less CPU
//! per proxied response (docs/performance.md, "Allocator"). Built with `no_thp`: mimalloc
//! otherwise asks for transparent huge pages on its arenas, and the idle process then held
//! 15 MB instead of 9 MB. The library and its tests keep the system allocator; only the binary
//! sets this. The `system-alloc` feature leaves it out, for heap profilers that watch `malloc`
//! (heaptrack: `docs/performance.md`, "Memory").

#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
