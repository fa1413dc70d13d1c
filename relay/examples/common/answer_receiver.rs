//! A receiver that writes its answer's status line and body in one write
//! or in two, shared by `bench_answer` and the relay's delivery tests
//! (`relay/tests/it/deliver.rs`, which include this file).

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

/// A keep-alive receiver on 127.0.0.1 that answers every request `200 OK`
/// with the body `ok`, the status line and the body in one write or in
/// two (`apart`). Nagle's algorithm stays on, as such servers leave it.
pub(crate) async fn receiver(apart: bool) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut conn = tokio::io::BufReader::new(tcp);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if conn.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n";
                    let tcp = conn.get_mut();
                    let sent = if apart {
                        match tcp.write_all(head).await {
                            Ok(()) => tcp.write_all(b"ok").await,
                            Err(e) => Err(e),
                        }
                    } else {
                        tcp.write_all(&[&head[..], b"ok"].concat()).await
                    };
                    if sent.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(url)
}
