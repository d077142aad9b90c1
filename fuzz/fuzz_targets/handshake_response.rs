#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shoal_proxy::fuzzing::handshake_response(data));
