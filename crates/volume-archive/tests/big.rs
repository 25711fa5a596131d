#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The evidence: a 200 MB volume exported and verified; a flipped
//! byte is reported by file.

mod common;

use std::fs::{self, File};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::time::Instant;

use abode_volume_archive::{export, verify, Problem};

const FILE_BYTES: usize = 50 * 1000 * 1000;
const CHUNK: usize = 1 << 20;

/// Pseudo-random bytes from xorshift64, written in chunks.
fn write_random(path: &std::path::Path, seed: u64) {
    let mut state = seed;
    let mut out = File::create(path).unwrap();
    let mut chunk = vec![0u8; CHUNK];
    let mut left = FILE_BYTES;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(CHUNK);
        out.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
}

#[test]
fn export_and_verify_200_mb() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    fs::create_dir_all(root.join("data")).unwrap();
    for (i, seed) in [0x9e37_79b9_7f4a_7c15u64, 2, 3, 4].into_iter().enumerate() {
        write_random(&root.join(format!("data/part-{i}.bin")), seed);
    }
    let archive = tmp.path().join("vol.tar");

    let started = Instant::now();
    let summary = export(&root, File::create(&archive).unwrap(), &common::meta()).unwrap();
    let exported = started.elapsed();
    assert_eq!(summary.files, 4);
    assert_eq!(summary.bytes, 4 * FILE_BYTES as u64);

    let started = Instant::now();
    let report = verify(BufReader::new(File::open(&archive).unwrap())).unwrap();
    let verified = started.elapsed();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.bytes, 4 * FILE_BYTES as u64);

    // Flip one byte in the middle of the third file's data, in place.
    let (_, pos, size) = {
        let mut head = Vec::new();
        // The members' offsets, from the headers alone (data skipped).
        let mut a = tar::Archive::new(File::open(&archive).unwrap());
        for e in a.entries().unwrap() {
            let e = e.unwrap();
            head.push((
                String::from_utf8(e.path_bytes().into_owned()).unwrap(),
                e.raw_file_position(),
                e.size(),
            ));
        }
        head.into_iter()
            .find(|(p, _, _)| p == "volume/data/part-2.bin")
            .unwrap()
    };
    let at = pos + size / 2;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&archive)
        .unwrap();
    let mut byte = [0u8; 1];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut byte).unwrap();
    byte[0] ^= 0x80;
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&byte).unwrap();
    drop(f);

    let report = verify(BufReader::new(File::open(&archive).unwrap())).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        matches!(&report.problems[0], Problem::Mismatch { path, .. } if path == "data/part-2.bin"),
        "{:?}",
        report.problems
    );
    eprintln!(
        "200 MB: export {exported:?}, verify {verified:?}; flipped byte: {}",
        report.problems[0]
    );
}
