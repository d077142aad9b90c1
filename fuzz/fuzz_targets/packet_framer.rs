#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shoal_proxy::fuzzing::packet_framer(data));
