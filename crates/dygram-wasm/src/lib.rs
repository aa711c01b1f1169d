//! The DyGram language in a web page: `dygram-core` and `dygram-analysis` compiled to WebAssembly
//! for the playground (`dygram serve`), behind three exported functions and JSON.
//!
//! The page writes a request (`{"op": "check", "text": …}`, see [`answer`]) into the buffer that
//! [`dy_input`] makes for it, calls [`dy_call`], and reads as many bytes of the answer from
//! [`dy_output`] as `dy_call` returned. Positions in requests and answers are UTF-16 code units,
//! as JavaScript strings count them. Nothing else crosses: no imports from the page, no IO.
//!
//! Exporting a function under a fixed name needs `no_mangle`, which the workspace's `unsafe_code`
//! lint counts as unsafe; this crate allows it for the three exports and has no `unsafe` block.
#![allow(unsafe_code)]

pub mod answer;

use std::cell::RefCell;

thread_local! {
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes for the next request; its address, for the page to write into.
#[unsafe(no_mangle)]
pub extern "C" fn dy_input(len: usize) -> *mut u8 {
    INPUT.with(|input| {
        let mut input = input.borrow_mut();
        input.clear();
        input.resize(len, 0);
        input.as_mut_ptr()
    })
}

/// Answers the request in the input buffer; the length of the answer in the output buffer.
#[unsafe(no_mangle)]
pub extern "C" fn dy_call() -> usize {
    let request = INPUT.with(|input| answer::answer_bytes(&input.borrow()));
    OUTPUT.with(|output| {
        let mut output = output.borrow_mut();
        *output = request;
        output.len()
    })
}

/// The address of the last answer.
#[unsafe(no_mangle)]
pub extern "C" fn dy_output() -> *const u8 {
    OUTPUT.with(|output| output.borrow().as_ptr())
}
