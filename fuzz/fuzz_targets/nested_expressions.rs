#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shoal_router::fuzzing::route_nested(data));
