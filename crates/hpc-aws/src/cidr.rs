//! IPv4 ranges as EC2 writes them (`10.0.0.0/16`): parsed once, compared by value.

use std::fmt;
use std::str::FromStr;

/// An IPv4 range: its first address and prefix length (host bits cleared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    base: u32,
    prefix: u8,
}

impl Cidr {
    fn mask(prefix: u8) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether every address of `other` is in this range.
    pub fn contains(&self, other: &Cidr) -> bool {
        other.prefix >= self.prefix && other.base & Cidr::mask(self.prefix) == self.base
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let bad = || format!("{s:?} is not an IPv4 range like 10.0.0.0/16");
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let octets: Vec<u8> = addr
            .split('.')
            .map(|o| o.parse().ok())
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        if octets.len() != 4 || prefix > 32 {
            return Err(bad());
        }
        let addr = octets.iter().fold(0u32, |acc, o| (acc << 8) | u32::from(*o));
        Ok(Cidr {
            base: addr & Cidr::mask(prefix),
            prefix,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.base.to_be_bytes();
        write!(f, "{}.{}.{}.{}/{}", b[0], b[1], b[2], b[3], self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::Cidr;

    fn c(s: &str) -> Cidr {
        s.parse().expect("cidr")
    }

    #[test]
    fn ranges_contain_and_overlap_by_their_addresses() {
        assert!(c("10.0.0.0/16").contains(&c("10.0.3.0/24")));
        assert!(!c("10.0.3.0/24").contains(&c("10.0.0.0/16")));
        assert!(c("10.0.3.0/24").overlaps(&c("10.0.0.0/16")));
        assert!(!c("10.0.0.0/16").overlaps(&c("10.1.0.0/16")));
        assert!(c("0.0.0.0/0").contains(&c("192.168.1.1/32")));
        assert_eq!(c("10.0.3.7/16").to_string(), "10.0.0.0/16");
    }

    #[test]
    fn what_is_not_a_range_is_refused_with_the_text() {
        for bad in ["10.0.0.0", "10.0.0/16", "10.0.0.256/16", "10.0.0.0/33", "x/8"] {
            let err = bad.parse::<Cidr>().expect_err(bad);
            assert!(err.contains(bad), "{err}");
        }
    }
}
