//! `callpost-relay`: run the relay, and look after it (see `cli`).

fn main() -> std::process::ExitCode {
    callpost_relay::cli::main()
}
