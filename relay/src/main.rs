//! `callpost-relay`: run the relay, and look after it (see `cli`).

/// The static build (`x86_64-unknown-linux-musl`, what the image and the
/// wheel hold) allocates with mimalloc: musl's allocator made its
/// deliveries cost half as much CPU again as the glibc build's.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    callpost_relay::cli::main()
}
