//! Print the findings of VOLP files: `cargo run -p rasterpack-volp --example dump -- FILE...`
fn main() {
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path).expect("read");
        println!("{path}");
        for f in rasterpack_volp::validate(&data).iter() {
            println!(
                "  {:7} {:32} {:>8} {}",
                f.severity.as_str(),
                f.code,
                f.offset.map(|o| o.to_string()).unwrap_or_default(),
                f.message
            );
        }
    }
}
