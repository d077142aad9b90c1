fn main() {
    println!("shoal: not yet");
}
