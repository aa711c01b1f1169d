//! Compiles arbitrary text and renders every output: nothing may panic.
#![no_main]

use dygram_core::json::JsonOptions;
use dygram_syntax::source::SourceFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let compiled = dygram_core::compile(SourceFile::new("fuzz.dy", text));
    for d in &compiled.diagnostics {
        let _ = d.one_line(&compiled.file);
        let _ = d.render(&compiled.file, false);
        let _ = d.render(&compiled.file, true);
    }
    if compiled.has_errors() {
        return;
    }
    let _ = compiled.json(JsonOptions {
        source_ranges: true,
    });
    let machine = compiled.json(JsonOptions::default());
    let _ = serde_json::to_string_pretty(&machine);
    let _ = dygram_core::render::dot::to_dot(&machine);
    let _ = dygram_core::render::mermaid::to_mermaid(&machine);
    let dsl = dygram_core::render::dsl::to_dsl(&machine);
    // The back-compiled text is read again (it need not be free of errors, only of panics).
    let again = dygram_core::compile(SourceFile::new("fuzz-dsl.dy", dsl));
    for d in &again.diagnostics {
        let _ = d.render(&again.file, false);
    }
});
