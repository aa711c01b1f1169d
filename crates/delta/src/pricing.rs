//! What a run's tokens cost, from a small table of list prices.
//!
//! Prices are the providers' published list prices per million tokens (standard tier, no batch or
//! cached-input discounts) as of mid-2025. A model is found by its exact name, or by its name followed
//! by a date (`gpt-4o-mini-2024-07-18`, `claude-3-5-sonnet-20241022`) or `-latest`. A model the table
//! does not know has no cost: the result then leaves `total_cost_usd` out rather than claiming 0.
//! The same table is in docs/delta.md.

/// Price of one model, in millionths of a dollar per million tokens ($0.15 is 150 000), so that costs
/// add up exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    /// Per million input (prompt) tokens.
    pub input: u64,
    /// Per million output (completion) tokens.
    pub output: u64,
}

const fn usd(input_cents_per_million: u64, output_cents_per_million: u64) -> Price {
    Price {
        input: input_cents_per_million * 10_000,
        output: output_cents_per_million * 10_000,
    }
}

/// Known models and their prices (cents per million tokens, input then output).
pub const PRICES: &[(&str, Price)] = &[
    ("gpt-4o", usd(250, 1000)),
    ("gpt-4o-mini", usd(15, 60)),
    ("gpt-4.1", usd(200, 800)),
    ("gpt-4.1-mini", usd(40, 160)),
    ("gpt-4.1-nano", usd(10, 40)),
    ("gpt-4-turbo", usd(1000, 3000)),
    ("gpt-3.5-turbo", usd(50, 150)),
    ("o3-mini", usd(110, 440)),
    ("o4-mini", usd(110, 440)),
    ("claude-opus-4", usd(1500, 7500)),
    ("claude-sonnet-4", usd(300, 1500)),
    ("claude-3-7-sonnet", usd(300, 1500)),
    ("claude-3-5-sonnet", usd(300, 1500)),
    ("claude-3-5-haiku", usd(80, 400)),
    ("claude-3-opus", usd(1500, 7500)),
    ("claude-3-haiku", usd(25, 125)),
];

/// Whether `rest` (what follows a known name) is a version suffix: `-2024-07-18`, `-20241022`,
/// `-latest`, or nothing.
fn is_version_suffix(rest: &str) -> bool {
    let Some(rest) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    if rest == "latest" {
        return true;
    }
    let digits: String = rest.chars().filter(|c| *c != '-').collect();
    digits.len() == 8
        && digits.chars().all(|c| c.is_ascii_digit())
        && (rest.len() == 8 || (rest.len() == 10 && rest.matches('-').count() == 2))
}

/// The price of `model`, when the table knows it.
pub fn price(model: &str) -> Option<Price> {
    let model = model.trim().to_ascii_lowercase();
    PRICES
        .iter()
        .filter(|(name, _)| model.strip_prefix(name).is_some_and(is_version_suffix))
        .map(|(_, price)| *price)
        .next()
}

/// What `input` and `output` tokens of `model` cost in dollars, when its price is known.
pub fn cost_usd(model: &str, input: u64, output: u64) -> Option<f64> {
    let p = price(model)?;
    let micro_dollars_times_million =
        u128::from(input) * u128::from(p.input) + u128::from(output) * u128::from(p.output);
    Some(micro_dollars_times_million as f64 / 1e12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_dates_and_unknown_models() {
        assert_eq!(cost_usd("gpt-4o-mini", 1_000_000, 500_000), Some(0.45));
        assert_eq!(cost_usd("gpt-4o-mini-2024-07-18", 1_000_000, 0), Some(0.15));
        assert_eq!(cost_usd("gpt-4o", 1_000_000, 0), Some(2.5));
        assert_eq!(
            cost_usd("claude-3-5-sonnet-20241022", 0, 1_000_000),
            Some(15.0)
        );
        assert_eq!(cost_usd("claude-3-5-haiku-latest", 1_000_000, 0), Some(0.8));
        assert_eq!(cost_usd("gpt-4o-audio-preview", 1, 1), None);
        assert_eq!(cost_usd("gpt-4o-minimal", 1, 1), None);
        assert_eq!(cost_usd("test-model", 1, 1), None);
        assert_eq!(cost_usd("", 1, 1), None);
        assert_eq!(cost_usd("gpt-4o-mini", 0, 0), Some(0.0));
    }
}
