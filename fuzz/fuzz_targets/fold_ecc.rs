#![no_main]
//! Reed-Solomon decoder over arbitrary codewords: never panics, and whatever it "corrects"
//! is a valid codeword within the correction radius of the input.
use libfuzzer_sys::fuzz_target;
use rasterpack_fold::ecc::Rs;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let nsym = [2usize, 16, 32, 64][(sel & 3) as usize];
    let rs = Rs::new(nsym).expect("valid nsym");
    let cw_len = rest.len().min(255);
    let mut cw = rest[..cw_len].to_vec();
    let orig = cw.clone();
    match rs.correct(&mut cw) {
        Ok(n) => {
            assert!(n <= nsym / 2);
            let changed = cw.iter().zip(&orig).filter(|(a, b)| a != b).count();
            assert_eq!(changed, n);
            // The corrected word must be a codeword: re-encoding its data gives its parity.
            let k = cw.len() - nsym;
            assert_eq!(rs.parity(&cw[..k]), cw[k..].to_vec());
        }
        Err(_) => assert_eq!(cw, orig, "a failed correction must leave the input untouched"),
    }
    // Repair in both ECC layouts, and layout detection, over the same bytes split as
    // payload + ECC (one block's worth of ECC, or as many as a multi-block payload needs).
    use rasterpack_fold::ecc::{layout_of, repair, Layout};
    for ecc_len in [nsym, rest.len().div_ceil(rs.k() + nsym) * nsym] {
        if rest.len() > ecc_len {
            let (payload, ecc) = rest.split_at(rest.len() - ecc_len);
            for layout in [Layout::BlockParity, Layout::PyfoldsTail] {
                let mut p = payload.to_vec();
                let _ = repair(&rs, &mut p, ecc, layout);
            }
            let _ = layout_of(&rs, payload, ecc);
        }
    }
});
