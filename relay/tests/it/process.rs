//! The relay as its own process: how it starts and stops.
// Test code: a panic is how it reports.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CONFIG: &str = r#"
listen = "127.0.0.1:0"
admin_token = "a-token-of-at-least-32-characters-long"

[[sources]]
name = "web"
write_keys = ["wk"]
[sources.webhooks]
urls = ["http://127.0.0.1:9/hook"]
shared_secret = "a-shared-secret"

[security]
allow_private_networks = true
"#;

/// A deploy may stop the relay at any moment of its start: a SIGTERM sent
/// at its first log line (the database opened, long before it listens) is
/// a graceful stop (exit 0, "relay stopped"), never the default kill.
#[test]
fn a_sigterm_during_the_start_stops_the_relay_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, CONFIG).unwrap();
    for run in 0..3 {
        let database = format!("sqlite:///{}/relay-{run}.db", dir.path().display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_callpost-relay"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "--database",
                &database,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, seen) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let first = seen
            .recv_timeout(Duration::from_secs(60))
            .expect("the relay logs as it starts");
        assert!(first.contains("schema migrated"), "{first}");
        let mut log = vec![first];
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        log.extend(seen.iter());
        assert!(
            status.success(),
            "run {run}: {status} after SIGTERM: {log:#?}"
        );
        assert!(
            log.iter().any(|l| l.contains("relay stopped")),
            "run {run}: {log:#?}"
        );
    }
}
