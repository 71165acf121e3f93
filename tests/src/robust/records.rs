//! The `record_decode` target: arbitrary bytes through the record decoder.

use super::*;

/// `record::decode` on arbitrary bytes: never panics, and whatever it accepts is exactly
/// what `encode` writes (so every accepted record round-trips bit for bit); every length it
/// reports stays inside the buffer and under the 64 MiB bound. Also walks the bytes as a
/// block body, as recovery does, and checks a block header on them.
pub fn fuzz_record_decode(data: &[u8]) {
    check_decode(data);
    for cut in [1usize, 4, 35, 36] {
        if data.len() > cut {
            check_decode(&data[..data.len() - cut]);
        }
    }
    let h = &data[..data.len().min(record::BLOCK_HEADER_LEN as usize)];
    match record::check_block_header("f", h, 1) {
        Ok(_) => {}
        Err(Error::Corrupt { file, offset, .. }) => {
            assert_eq!(file, "f");
            assert!(offset < record::BLOCK_HEADER_LEN, "header offset {offset}");
        }
        Err(e) => panic!("block header check: unexpected error {e:?}"),
    }
    // walk it as a block body: every step moves forward, so this ends
    let mut pos = 0;
    while pos < data.len() {
        match decode(&data[pos..]) {
            Decoded::Record(r) => pos += r.len,
            Decoded::Bad {
                framed: Some(l), ..
            } => pos += l,
            _ => break,
        }
    }
}

fn check_decode(b: &[u8]) {
    match decode(b) {
        Decoded::Record(r) => {
            assert!(
                (REC_OVERHEAD..=HARD_MAX_RECORD).contains(&r.len) && r.len <= b.len(),
                "record length {} out of bounds (buffer {})",
                r.len,
                b.len()
            );
            let subj_len = u16::from_le_bytes([b[6], b[7]]) as usize;
            assert_eq!(
                encoded_len(subj_len, r.headers.len(), r.payload.len()),
                r.len
            );
            if r.kind != Kind::Msg {
                assert!(r.len == REC_OVERHEAD && r.flags == 0, "marker with a body");
            }
            if r.subject.len() == subj_len {
                let mut v = Vec::new();
                let crc = encode(
                    &mut v,
                    r.kind,
                    r.flags,
                    r.seq,
                    r.ts,
                    r.subject.as_bytes(),
                    r.headers,
                    r.payload,
                );
                assert_eq!(crc, r.crc, "crc differs on re-encode");
                assert!(v == b[..r.len], "accepted record does not round-trip");
            } else {
                // only an erased record may have its (zeroed) subject replaced
                assert!(r.flags & record::FLAG_ERASED != 0 && r.subject.is_empty());
            }
        }
        Decoded::Short(n) => {
            assert!(
                n > b.len() && (REC_OVERHEAD..=HARD_MAX_RECORD).contains(&n),
                "Short({n}) for {} bytes",
                b.len()
            );
        }
        Decoded::End => {
            assert!(b.len() < 4 || b[..4] == [0; 4], "End on a non-zero length");
        }
        Decoded::Bad { framed, .. } => {
            if let Some(l) = framed {
                assert!(
                    (REC_OVERHEAD..=b.len()).contains(&l),
                    "framed length {l} out of the buffer ({})",
                    b.len()
                );
            }
        }
    }
}
