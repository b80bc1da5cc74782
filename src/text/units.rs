//! Units of measure, currencies and number scales.
//!
//! Input: the symbol as written after (or, for currency symbols, before) a number. Output: singular and
//! plural spoken names, US spelling ("meter", "liter"). Invariants: symbols are matched case-sensitively
//! ("mB" is not "MB", "M" is not "m"); a few symbols that are also everyday words ("in", "x") only count
//! when glued to the number ("5in", "2x").

/// A spoken unit name: `one` after exactly 1, `many` otherwise ("1 km" → "one kilometer").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    pub one: &'static str,
    pub many: &'static str,
}

const fn n(one: &'static str, many: &'static str) -> Name {
    Name { one, many }
}

/// A unit symbol after a number; `glued` says the symbol was written without a space ("5km").
pub fn unit(sym: &str, glued: bool) -> Option<Name> {
    Some(match sym {
        "km" => n("kilometer", "kilometers"),
        "m" => n("meter", "meters"),
        "cm" => n("centimeter", "centimeters"),
        "mm" => n("millimeter", "millimeters"),
        "μm" | "µm" => n("micrometer", "micrometers"),
        "nm" => n("nanometer", "nanometers"),
        "mi" => n("mile", "miles"),
        "ft" => n("foot", "feet"),
        "yd" => n("yard", "yards"),
        "in" if glued => n("inch", "inches"),
        "kg" => n("kilogram", "kilograms"),
        "g" => n("gram", "grams"),
        "mg" => n("milligram", "milligrams"),
        "μg" | "µg" => n("microgram", "micrograms"),
        "lb" | "lbs" => n("pound", "pounds"),
        "oz" => n("ounce", "ounces"),
        "l" | "L" => n("liter", "liters"),
        "ml" | "mL" => n("milliliter", "milliliters"),
        "gal" => n("gallon", "gallons"),
        "mph" => n("mile per hour", "miles per hour"),
        "km/h" | "kph" | "kmh" => n("kilometer per hour", "kilometers per hour"),
        "m/s" => n("meter per second", "meters per second"),
        "°C" => n("degree Celsius", "degrees Celsius"),
        "°F" => n("degree Fahrenheit", "degrees Fahrenheit"),
        "°" => n("degree", "degrees"),
        "Hz" => n("hertz", "hertz"),
        "kHz" => n("kilohertz", "kilohertz"),
        "MHz" => n("megahertz", "megahertz"),
        "GHz" => n("gigahertz", "gigahertz"),
        "KB" | "kB" => n("kilobyte", "kilobytes"),
        "MB" => n("megabyte", "megabytes"),
        "GB" => n("gigabyte", "gigabytes"),
        "TB" => n("terabyte", "terabytes"),
        "PB" => n("petabyte", "petabytes"),
        "Mbps" => n("megabit per second", "megabits per second"),
        "Gbps" => n("gigabit per second", "gigabits per second"),
        "W" => n("watt", "watts"),
        "kW" => n("kilowatt", "kilowatts"),
        "MW" => n("megawatt", "megawatts"),
        "kWh" => n("kilowatt hour", "kilowatt hours"),
        "V" => n("volt", "volts"),
        "mA" => n("milliamp", "milliamps"),
        "mAh" => n("milliamp hour", "milliamp hours"),
        "dB" => n("decibel", "decibels"),
        "kcal" => n("kilocalorie", "kilocalories"),
        "ms" => n("millisecond", "milliseconds"),
        "sec" | "secs" => n("second", "seconds"),
        "min" | "mins" => n("minute", "minutes"),
        "h" | "hr" | "hrs" => n("hour", "hours"),
        "yr" | "yrs" => n("year", "years"),
        "ha" => n("hectare", "hectares"),
        "m²" => n("square meter", "square meters"),
        "km²" => n("square kilometer", "square kilometers"),
        "cm²" => n("square centimeter", "square centimeters"),
        "ft²" => n("square foot", "square feet"),
        "mi²" => n("square mile", "square miles"),
        "m³" => n("cubic meter", "cubic meters"),
        "cm³" => n("cubic centimeter", "cubic centimeters"),
        "%" => n("percent", "percent"),
        "x" | "×" if glued => n("times", "times"),
        _ => return None,
    })
}

/// A currency written before the amount: its main and minor unit names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Currency {
    pub main: Name,
    pub minor: Option<Name>,
}

const DOLLAR: Currency = Currency {
    main: n("dollar", "dollars"),
    minor: Some(n("cent", "cents")),
};

/// Splits a currency prefix off the start of `s` ("$5" → dollars, "5"); longest symbol first.
pub fn currency_prefix(s: &str) -> Option<(Currency, &str)> {
    const TABLE: [(&str, Currency); 12] = [
        (
            "US$",
            Currency {
                main: n("US dollar", "US dollars"),
                minor: Some(n("cent", "cents")),
            },
        ),
        (
            "CA$",
            Currency {
                main: n("Canadian dollar", "Canadian dollars"),
                minor: Some(n("cent", "cents")),
            },
        ),
        (
            "C$",
            Currency {
                main: n("Canadian dollar", "Canadian dollars"),
                minor: Some(n("cent", "cents")),
            },
        ),
        (
            "AU$",
            Currency {
                main: n("Australian dollar", "Australian dollars"),
                minor: Some(n("cent", "cents")),
            },
        ),
        (
            "A$",
            Currency {
                main: n("Australian dollar", "Australian dollars"),
                minor: Some(n("cent", "cents")),
            },
        ),
        ("$", DOLLAR),
        (
            "£",
            Currency {
                main: n("pound", "pounds"),
                minor: Some(n("penny", "pence")),
            },
        ),
        (
            "€",
            Currency {
                main: n("euro", "euros"),
                minor: Some(n("cent", "cents")),
            },
        ),
        (
            "¥",
            Currency {
                main: n("yen", "yen"),
                minor: None,
            },
        ),
        (
            "₹",
            Currency {
                main: n("rupee", "rupees"),
                minor: Some(n("paisa", "paise")),
            },
        ),
        (
            "₩",
            Currency {
                main: n("won", "won"),
                minor: None,
            },
        ),
        (
            "₽",
            Currency {
                main: n("ruble", "rubles"),
                minor: Some(n("kopek", "kopeks")),
            },
        ),
    ];
    TABLE
        .iter()
        .find_map(|(sym, cur)| s.strip_prefix(sym).map(|rest| (*cur, rest)))
}

/// An ISO currency code written after the amount ("5 USD").
pub fn currency_code(code: &str) -> Option<Name> {
    Some(match code {
        "USD" => n("US dollar", "US dollars"),
        "EUR" => n("euro", "euros"),
        "GBP" => n("British pound", "British pounds"),
        "JPY" => n("yen", "yen"),
        "CAD" => n("Canadian dollar", "Canadian dollars"),
        "AUD" => n("Australian dollar", "Australian dollars"),
        "CHF" => n("Swiss franc", "Swiss francs"),
        "CNY" => n("yuan", "yuan"),
        "INR" => n("rupee", "rupees"),
        "BTC" => n("bitcoin", "bitcoins"),
        _ => return None,
    })
}

/// A scale after a money amount, glued ("$5M", "$2bn", "$10k") or as a word ("$1.5 million").
pub fn scale(s: &str, glued: bool) -> Option<&'static str> {
    Some(match s {
        "k" | "K" if glued => "thousand",
        "m" | "M" | "mn" if glued => "million",
        "b" | "B" | "bn" if glued => "billion",
        "t" | "T" | "tn" if glued => "trillion",
        "thousand" => "thousand",
        "million" => "million",
        "billion" => "billion",
        "trillion" => "trillion",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(unit("km", false).map(|u| u.many), Some("kilometers"));
        assert_eq!(unit("ft", true).map(|u| u.many), Some("feet"));
        assert_eq!(unit("in", false), None);
        assert_eq!(unit("in", true).map(|u| u.one), Some("inch"));
        assert_eq!(unit("x", false), None);
        assert_eq!(unit("Km", false), None);
        assert_eq!(
            currency_prefix("$5").map(|c| (c.0.main.many, c.1)),
            Some(("dollars", "5"))
        );
        assert_eq!(
            currency_prefix("US$5").map(|c| (c.0.main.many, c.1)),
            Some(("US dollars", "5"))
        );
        assert_eq!(
            currency_prefix("£3").map(|c| c.0.minor.map(|m| m.many)),
            Some(Some("pence"))
        );
        assert_eq!(currency_prefix("5$"), None);
        assert_eq!(currency_code("USD").map(|c| c.many), Some("US dollars"));
        assert_eq!(scale("M", true), Some("million"));
        assert_eq!(scale("M", false), None);
        assert_eq!(scale("billion", false), Some("billion"));
    }
}
