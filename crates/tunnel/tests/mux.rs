//! Two ends of a tunnel joined by channels: streams both ways, EOF, flow
//! control that keeps a stalled stream from holding up another, and the end
//! of the connection ending every stream.
#![allow(clippy::unwrap_used)]

use abode_tunnel::{Incoming, Mux, Side};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// A server end and an agent end; the agent's accepted streams come back.
fn pair() -> (Mux, Mux, mpsc::Receiver<Incoming>, mpsc::Sender<Vec<u8>>) {
    let (to_agent, agent_in) = mpsc::channel(8);
    let (to_server, server_in) = mpsc::channel(8);
    let (server, _server_accept, _) = Mux::start(Side::Server, server_in, to_agent.clone());
    let (agent, agent_accept, _) = Mux::start(Side::Agent, agent_in, to_server);
    (server, agent, agent_accept, to_agent)
}

/// Echoes every accepted stream back, with its header first.
fn echo(mut accept: mpsc::Receiver<Incoming>) {
    tokio::spawn(async move {
        while let Some(incoming) = accept.recv().await {
            let header = incoming.header.clone();
            let stream = incoming.into_stream();
            tokio::spawn(async move {
                let (mut read, mut write) = tokio::io::split(stream);
                write.write_all(&header).await.unwrap();
                tokio::io::copy(&mut read, &mut write).await.unwrap();
                write.shutdown().await.unwrap();
            });
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_carry_bytes_both_ways_until_eof() {
    let (server, _agent, accept, _) = pair();
    echo(accept);
    let sizes = [0usize, 1, 40_000, 3 * 1024 * 1024];
    let mut tasks = Vec::new();
    for (n, size) in sizes.into_iter().enumerate() {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let header = format!("h{n}:").into_bytes();
            let stream = server.open(header.clone()).await.unwrap();
            let (mut read, mut write) = tokio::io::split(stream);
            let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let sent = payload.clone();
            let writer = tokio::spawn(async move {
                write.write_all(&sent).await.unwrap();
                write.shutdown().await.unwrap();
            });
            let mut got = Vec::new();
            read.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            let mut expected = header;
            expected.extend_from_slice(&payload);
            assert_eq!(got.len(), expected.len(), "stream {n}");
            assert!(got == expected, "stream {n}");
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_nobody_reads_does_not_stall_another() {
    let (server, _agent, mut accept, _) = pair();
    let stalled = server.open(b"stalled".to_vec()).await.unwrap();
    let kept = accept.recv().await.unwrap();
    assert_eq!(kept.header, b"stalled");
    // Fill the stalled stream far past its window; nobody reads it.
    let (_stalled_read, mut stalled_write) = tokio::io::split(stalled);
    tokio::spawn(async move {
        let chunk = vec![7u8; 64 * 1024];
        loop {
            if stalled_write.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    echo(accept);
    let stream = server.open(Vec::new()).await.unwrap();
    let (mut read, mut write) = tokio::io::split(stream);
    write.write_all(b"still moving").await.unwrap();
    write.shutdown().await.unwrap();
    let mut got = Vec::new();
    read.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"still moving");
    drop(kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_ends_every_stream() {
    // The other side is played by hand: it sees the Open frame, then the
    // transport goes away (the socket's reader closes the channel).
    let (to_agent, mut agent_in) = mpsc::channel(8);
    let (to_server, server_in) = mpsc::channel(8);
    let (server, _accept, task) = Mux::start(Side::Server, server_in, to_agent);
    let mut stream = server.open(b"x".to_vec()).await.unwrap();
    let open = agent_in.recv().await.unwrap();
    assert_eq!(
        abode_tunnel::frame::Frame::decode(open).unwrap(),
        abode_tunnel::frame::Frame::Open {
            id: 2,
            header: b"x".to_vec()
        }
    );
    drop(to_server);
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.unwrap();
    assert!(got.is_empty());
    task.await.unwrap().unwrap();
    assert_eq!(server.stream_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_that_breaks_the_flow_control_loses_its_connection() {
    use abode_tunnel::frame::{Frame, MAX_DATA, WINDOW};
    let cases = [
        // More data than the window, never granted back (nobody reads).
        (
            // (the stream's pipe takes a little first, then nothing more).
            (0..2 * (WINDOW as usize / MAX_DATA))
                .map(|_| Frame::Data {
                    id: 1,
                    bytes: vec![0; MAX_DATA],
                })
                .collect::<Vec<_>>(),
            "more than granted",
        ),
        // Empty frames cost no credit: past the one a stream may send,
        // a flood.
        (
            (0..2)
                .map(|_| Frame::Data {
                    id: 1,
                    bytes: Vec::new(),
                })
                .collect::<Vec<_>>(),
            "a second empty frame",
        ),
        // Credit for bytes never sent.
        (
            vec![Frame::Grant {
                id: 1,
                credit: u32::MAX,
            }],
            "a grant past the window",
        ),
    ];
    for (frames, what) in cases {
        let (to_server, server_in) = mpsc::channel(1024);
        let (to_agent, _agent_in) = mpsc::channel(1024);
        let (_server, mut accept, task) = Mux::start(Side::Server, server_in, to_agent);
        to_server
            .send(
                Frame::Open {
                    id: 1,
                    header: Vec::new(),
                }
                .encode(),
            )
            .await
            .unwrap();
        // Accepted, and never read.
        let _stream = accept.recv().await.unwrap();
        for frame in frames {
            if to_server.send(frame.encode()).await.is_err() {
                break;
            }
        }
        let ended = task.await.unwrap();
        assert!(
            matches!(ended, Err(abode_tunnel::MuxError::FlowControl(1))),
            "{what}: {ended:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_streams_carry_bytes_both_ways_until_eof() {
    let (server, agent, accept, _) = pair();
    echo(accept);
    for size in [0usize, 1, 70_000, 3 * 1024 * 1024] {
        let (mut sender, mut receiver) = server.open_messages(b"m:".to_vec()).await.unwrap();
        let payload: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
        let sent = payload.clone();
        // Chunks of odd sizes, some above a frame's limit.
        let writer = tokio::spawn(async move {
            for chunk in sent.chunks(100_003) {
                sender.send(chunk).await.unwrap();
            }
            sender.finish().await.unwrap();
        });
        let mut got = Vec::new();
        while let Some(bytes) = receiver.recv().await {
            assert!(bytes.len() <= abode_tunnel::frame::MAX_DATA);
            got.extend_from_slice(&bytes);
        }
        writer.await.unwrap();
        let mut expected = b"m:".to_vec();
        expected.extend_from_slice(&payload);
        assert_eq!(got.len(), expected.len(), "size {size}");
        assert!(got == expected, "size {size}");
        drop(receiver);
    }
    // Every stream ended cleanly: none is left on either side.
    for _ in 0..100 {
        if server.stream_count() == 0 && agent.stream_count() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!((server.stream_count(), agent.stream_count()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_stream_dropped_early_is_reset_on_the_other_side() {
    let (server, agent, mut accept, _) = pair();
    let (sender, receiver) = server.open_messages(Vec::new()).await.unwrap();
    let stream = accept.recv().await.unwrap().into_stream();
    drop((sender, receiver));
    // The other side's reads end (its stream is gone) rather than hang.
    let (mut read, _write) = tokio::io::split(stream);
    let mut got = Vec::new();
    read.read_to_end(&mut got).await.unwrap();
    assert!(got.is_empty());
    assert_eq!(server.stream_count(), 0);
    let _ = agent;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_never_exceed_what_the_peer_takes() {
    use abode_tunnel::frame::Frame;
    // The other side is played by hand: it takes frames of 1000 bytes.
    let (to_agent, mut agent_in) = mpsc::channel(64);
    let (_to_server, server_in) = mpsc::channel(8);
    let (server, _accept, _task) = Mux::start_with_peer(
        Side::Server,
        abode_tunnel::frame::PeerLimits {
            max_data: 1000,
            window: abode_tunnel::frame::WINDOW,
        },
        server_in,
        to_agent,
    );
    let stream = server.open(Vec::new()).await.unwrap();
    let (mut sender, _receiver) = server.open_messages(Vec::new()).await.unwrap();
    let (_read, mut write) = tokio::io::split(stream);
    write.write_all(&[1u8; 5000]).await.unwrap();
    sender.send(&[2u8; 5000]).await.unwrap();
    let mut data = 0;
    while data < 10_000 {
        match Frame::decode(agent_in.recv().await.unwrap()).unwrap() {
            Frame::Data { bytes, .. } => {
                assert!(bytes.len() <= 1000, "{}", bytes.len());
                data += bytes.len();
            }
            Frame::Open { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_peer_gets_its_frames_and_never_more_than_its_window() {
    use abode_tunnel::frame::{Frame, PeerLimits, LEGACY_MAX_DATA, LEGACY_WINDOW};
    // An agent from before: 32 KiB frames, a 256 KiB window, played by hand
    // (it never grants).
    let (to_agent, mut agent_in) = mpsc::channel(64);
    let (_to_server, server_in) = mpsc::channel(8);
    let (server, _accept, _task) =
        Mux::start_with_peer(Side::Server, PeerLimits::LEGACY, server_in, to_agent);
    let (mut sender, _receiver) = server.open_messages(Vec::new()).await.unwrap();
    tokio::spawn(async move {
        let _ = sender.send(&vec![3u8; 2 * LEGACY_WINDOW as usize]).await;
    });
    let mut data = 0;
    loop {
        let next = tokio::time::timeout(std::time::Duration::from_millis(500), agent_in.recv());
        let Ok(Some(message)) = next.await else { break };
        if let Frame::Data { bytes, .. } = Frame::decode(message).unwrap() {
            assert!(bytes.len() <= LEGACY_MAX_DATA);
            data += bytes.len();
        }
    }
    assert_eq!(data, LEGACY_WINDOW as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_streams_read_and_written_as_bytes_carry_them_until_eof() {
    let (server, _agent, accept, _) = pair();
    echo(accept);
    for size in [0usize, 1, 40_000, 3 * 1024 * 1024] {
        let (sender, receiver) = server.open_messages(b"h:".to_vec()).await.unwrap();
        let io = abode_tunnel::MessageIo::new(sender, receiver);
        let (mut read, mut write) = tokio::io::split(io);
        let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let sent = payload.clone();
        // Written in pieces of odd sizes, as an HTTP client does.
        let writer = tokio::spawn(async move {
            for piece in sent.chunks(70_001) {
                write.write_all(piece).await.unwrap();
            }
            write.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        // Read in small pieces: a chunk is handed out across reads.
        let mut buffer = [0u8; 1000];
        loop {
            let n = read.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buffer[..n]);
        }
        writer.await.unwrap();
        let mut expected = b"h:".to_vec();
        expected.extend_from_slice(&payload);
        assert_eq!(got.len(), expected.len(), "size {size}");
        assert!(got == expected, "size {size}: the bytes differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incoming_stream_taken_as_messages_reads_a_socket_straight_into_frames() {
    let (server, _agent, mut accept, _) = pair();
    let mut opened = server.open(b"forward".to_vec()).await.unwrap();
    let incoming = accept.recv().await.unwrap();
    assert_eq!(incoming.header, b"forward");
    let (mut sender, mut receiver) = incoming.into_messages();
    // More than a window, from a reader that hands out odd-sized pieces.
    let payload: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    let expected = payload.clone();
    let sending = tokio::spawn(async move {
        let mut reader = &payload[..];
        let mut sent = 0;
        loop {
            match sender.send_read(&mut reader).await.unwrap() {
                0 => break,
                read => sent += read,
            }
        }
        sender.finish().await.unwrap();
        sent
    });
    opened.write_all(b"upload").await.unwrap();
    opened.shutdown().await.unwrap();
    let mut downloaded = Vec::new();
    opened.read_to_end(&mut downloaded).await.unwrap();
    assert_eq!(sending.await.unwrap(), expected.len());
    assert!(
        downloaded == expected,
        "the bytes arrive whole and in order"
    );
    let mut uploaded = Vec::new();
    while let Some(bytes) = receiver.recv().await {
        uploaded.extend_from_slice(&bytes);
    }
    assert_eq!(uploaded, b"upload");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incoming_stream_dropped_untaken_is_reset() {
    let (server, _agent, mut accept, _) = pair();
    let opened = server.open(b"nobody".to_vec()).await.unwrap();
    drop(accept.recv().await.unwrap());
    let (mut read, _write) = tokio::io::split(opened);
    let mut got = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        read.read_to_end(&mut got),
    )
    .await
    .expect("the opener's reads end once the stream is reset");
    assert!(got.is_empty());
    assert_eq!(server.stream_count(), 0);
}
