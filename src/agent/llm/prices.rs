//! What a call costs in money: the list prices of current Anthropic and
//! OpenAI models (dollars per million tokens; prompt-cache reads and writes
//! at their own price), which the settings file can change or extend. A
//! model with no price (a local one, a server's own) has tokens but no cost.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Usage;

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the prompt cache.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache (Anthropic charges for it).
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn of(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Price {
            input,
            output,
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
        }
    }

    /// The cost of `usage` in dollars: cached input at its own price (the
    /// input price where none is set), the rest of the input and the output
    /// at theirs.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        let plain = usage.input_tokens.saturating_sub(cached) as f64;
        let read = usage.cache_read_tokens as f64 * self.cache_read.unwrap_or(self.input);
        let written = usage.cache_write_tokens as f64 * self.cache_write.unwrap_or(self.input);
        (plain * self.input + read + written + usage.output_tokens as f64 * self.output) / 1e6
    }
}

/// List prices, by the start of the model's name (the longest match wins,
/// so `gpt-4o-mini` is not priced as `gpt-4o`). Anthropic's cache writes are
/// its five-minute writes; OpenAI charges nothing to write its cache.
const LIST_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::of(5.0, 25.0, 0.50, 6.25)),
    ("claude-opus-4", Price::of(15.0, 75.0, 1.50, 18.75)),
    ("claude-sonnet-4", Price::of(3.0, 15.0, 0.30, 3.75)),
    ("claude-3-7-sonnet", Price::of(3.0, 15.0, 0.30, 3.75)),
    ("claude-haiku-4", Price::of(1.0, 5.0, 0.10, 1.25)),
    ("claude-3-5-haiku", Price::of(0.80, 4.0, 0.08, 1.0)),
    ("gpt-5-nano", Price::of(0.05, 0.40, 0.005, 0.0)),
    ("gpt-5-mini", Price::of(0.25, 2.0, 0.025, 0.0)),
    ("gpt-5", Price::of(1.25, 10.0, 0.125, 0.0)),
    ("gpt-4.1-nano", Price::of(0.10, 0.40, 0.025, 0.0)),
    ("gpt-4.1-mini", Price::of(0.40, 1.60, 0.10, 0.0)),
    ("gpt-4.1", Price::of(2.0, 8.0, 0.50, 0.0)),
    ("gpt-4o-mini", Price::of(0.15, 0.60, 0.075, 0.0)),
    ("gpt-4o", Price::of(2.50, 10.0, 1.25, 0.0)),
    ("o4-mini", Price::of(1.10, 4.40, 0.275, 0.0)),
    ("o3-mini", Price::of(1.10, 4.40, 0.55, 0.0)),
    ("o3", Price::of(2.0, 8.0, 0.50, 0.0)),
];

/// The price list a run uses: the list prices with the settings file's
/// `[prices]` entries over them (same rule: the longest start of the name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    overrides: BTreeMap<String, Price>,
}

impl Prices {
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Prices { overrides }
    }

    /// The price of `model`, if one is known.
    pub fn of(&self, model: &str) -> Option<Price> {
        let own = longest_match(
            self.overrides
                .iter()
                .map(|(name, price)| (name.as_str(), *price)),
            model,
        );
        own.or_else(|| longest_match(LIST_PRICES.iter().copied(), model))
    }
}

fn longest_match<'a>(prices: impl Iterator<Item = (&'a str, Price)>, model: &str) -> Option<Price> {
    // Provider prefixes some gateways add (`anthropic/claude-...`) aside.
    let model = model.rsplit('/').next().unwrap_or(model);
    prices
        .filter(|(start, _)| model.starts_with(start))
        .max_by_key(|(start, _)| start.len())
        .map(|(_, price)| price)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, read: u64, write: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            cost_usd: None,
        }
    }

    #[test]
    fn the_longest_start_of_the_name_sets_the_price() {
        let prices = Prices::default();
        assert_eq!(prices.of("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(prices.of("gpt-4o-2024-08-06").unwrap().input, 2.50);
        assert_eq!(
            prices.of("claude-sonnet-4-5-20250929").unwrap().output,
            15.0
        );
        assert_eq!(prices.of("anthropic/claude-haiku-4-5").unwrap().input, 1.0);
        assert!(prices.of("local-model").is_none());
        assert!(prices.of("qwen2.5-coder:7b").is_none());
    }

    #[test]
    fn cached_input_costs_its_own_price() {
        let sonnet = Prices::default().of("claude-sonnet-4-5").unwrap();
        // 1M input of which 600k read from the cache and 100k written to it.
        let cost = sonnet.cost(&usage(1_000_000, 600_000, 100_000, 10_000));
        let expected =
            (300_000.0 * 3.0 + 600_000.0 * 0.30 + 100_000.0 * 3.75 + 10_000.0 * 15.0) / 1e6;
        assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
        let without_cache_prices = Price {
            input: 2.0,
            output: 4.0,
            cache_read: None,
            cache_write: None,
        };
        let cost = without_cache_prices.cost(&usage(1000, 500, 0, 1000));
        assert!((cost - (1000.0 * 2.0 + 1000.0 * 4.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn the_settings_prices_come_first() {
        let own = Price {
            input: 9.0,
            output: 9.0,
            cache_read: None,
            cache_write: None,
        };
        let prices = Prices::new(BTreeMap::from([
            ("gpt-4o".to_owned(), own),
            ("my-model".to_owned(), own),
        ]));
        assert_eq!(prices.of("gpt-4o-2024-08-06"), Some(own));
        assert_eq!(prices.of("my-model-v2"), Some(own));
        // Own entries come first, whatever their length: `gpt-4o` covers
        // `gpt-4o-mini` too.
        assert_eq!(prices.of("gpt-4o-mini").map(|p| p.input), Some(9.0));
    }
}
