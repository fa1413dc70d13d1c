//! `callpost-relay`: serve, and the operator's commands.

use std::process::ExitCode;

/// Runs the command line.
pub fn main() -> ExitCode {
    ExitCode::SUCCESS
}
