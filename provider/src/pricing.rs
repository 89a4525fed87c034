//! Cost guardrails: the embedded on-demand price table, the glob matching used by
//! `guardrails.allowed_instance_types`, the "estimated max hourly cost" arithmetic, and the
//! checks behind `max_nodes_per_partition`, `max_vcpus_per_cluster`, `max_gpus_per_cluster`
//! and `max_hourly_cost_per_cluster`.
//!
//! Everything here is pure and synchronous: no AWS calls, so `terraform plan` can evaluate the
//! guardrails offline. Prices from the provider configuration (`overrides`) always win over the
//! embedded table.
//!
//! # The price table
//!
//! USD per instance-hour, On-Demand, Linux/UNIX, shared tenancy, no Savings Plan or Reserved
//! Instance discount. Region us-east-1 unless an entry says otherwise (see
//! [`TablePrice::region`]). Prices change; treat every figure as an estimate and prefer
//! overrides where exact numbers matter.
//!
//! Sources, read on 2026-12-02:
//!
//! * **Primary, every us-east-1 entry:** the generated price table of the Karpenter AWS provider,
//!   `github.com/aws/karpenter-provider-aws`, file
//!   `pkg/providers/pricing/zz_generated.pricing_aws.go` ("generated at 2026-07-20T13:44:30Z for
//!   us-east-1" from the AWS Price List API; commit `6fc13b5236fd`, "chore: Update data from AWS
//!   APIs (#9435)"). The us-east-1 prices below are therefore **as of 2026-07-20**.
//! * **hpc6a, hpc6id, hpc7a (us-east-2):** the SkyPilot catalog,
//!   `github.com/skypilot-org/skypilot-catalog`, file `catalogs/v8/aws/vms.csv` (commit
//!   `00148f2af367`, its `Price` column is the On-Demand list price per region). These families
//!   are not offered in us-east-1 at all (neither source lists them there), so their entries
//!   carry the price in us-east-2, the US commercial region that offers them. hpc6a.48xlarge
//!   at $2.88 also matches an independent public cost table; **hpc6id.32xlarge and hpc7a.\*
//!   rest on this single source** and are marked below.
//! * **Cross-checks:** a third-party table that states it was checked entry by entry against the
//!   AWS Price List offer file version 20260924211011 (September 2026) agrees with all 127 of its
//!   rows that overlap this table (t3, t3a, t4g, c5, c6i, c6a, c7g, c7i, m5, m6i, m6a, m7i, m7g,
//!   r6i, p3, p4d, p4de, p5, p5en, g4dn, g5, g6, g6e, trn1, trn1n, inf2). The SkyPilot catalog
//!   agrees in us-east-1 for p3.2xlarge, p3.16xlarge, p5.\*, p5en, p6-b200, trn1.\*, trn1n,
//!   hpc7g.\* and t3.2xlarge; a public GPU price data set retrieved 2026-11-09 agrees for p4d,
//!   p4de and p5; an AWS Auto Scaling user-guide example (labelled example pricing) shows the
//!   same c5 prices.
//!   Rows written `e(..)` agree with at least one of these. Rows written `s(..)` come from the
//!   Karpenter table alone (its figures are generated from the AWS Price List API); within each
//!   CPU family they follow AWS's constant price per vCPU, which was checked. The AWS pricing
//!   pages themselves were not reachable through the search available, so no figure was read
//!   off aws.amazon.com directly.
//!
//! Left out on purpose, rather than guessed: **p5e.48xlarge** and **trn2.48xlarge** have no
//! On-Demand list price in any source consulted (they are sold through EC2 Capacity Blocks for
//! ML, whose rates are set per reservation), and trn2 is not in us-east-1. Metal sizes are left
//! out except `c5n.metal` and `g4dn.metal`. Any type not in the table is "unpriced": callers
//! get `None` and should warn (see [`unpriced`]) or ask the user for an override.

/// Date of the price data behind the us-east-1 entries (the Karpenter table's generation date).
pub const PRICES_AS_OF: &str = "2026-07-20";

/// Date the sources were read and this table was compiled.
pub const PRICES_READ_ON: &str = "2026-12-02";

/// Region the table describes unless an entry says otherwise.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Tolerance, in US dollars, when comparing an estimated cost with a cost limit, so that
/// floating point noise (8 × 55.04 = 440.32000000000005) never reports a breach.
const COST_EPSILON: f64 = 1e-6;

/// One row of the embedded price table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TablePrice {
    /// EC2 instance type, e.g. `p5.48xlarge`.
    pub instance_type: &'static str,
    /// On-Demand Linux price in USD per hour.
    pub usd_per_hour: f64,
    /// Region the price was taken from: [`DEFAULT_REGION`], or another region for families that
    /// us-east-1 does not offer.
    pub region: &'static str,
    /// True when a second, independent source agreed with the figure; false when it rests on a
    /// single source (see the module documentation).
    pub cross_checked: bool,
}

/// A us-east-1 row that a second source agrees with.
const fn e(instance_type: &'static str, usd_per_hour: f64) -> TablePrice {
    TablePrice {
        instance_type,
        usd_per_hour,
        region: DEFAULT_REGION,
        cross_checked: true,
    }
}

/// A us-east-1 row from the primary source only.
const fn s(instance_type: &'static str, usd_per_hour: f64) -> TablePrice {
    TablePrice {
        instance_type,
        usd_per_hour,
        region: DEFAULT_REGION,
        cross_checked: false,
    }
}

/// A row for a family that us-east-1 does not offer, priced in us-east-2.
const fn ohio(instance_type: &'static str, usd_per_hour: f64, cross_checked: bool) -> TablePrice {
    TablePrice {
        instance_type,
        usd_per_hour,
        region: "us-east-2",
        cross_checked,
    }
}

/// The embedded price table. Families are grouped, sizes ascend within a family.
#[rustfmt::skip]
pub static PRICE_TABLE: &[TablePrice] = &[
    // Burstable, for head and login nodes: t3
    e("t3.nano", 0.0052), e("t3.micro", 0.0104), e("t3.small", 0.0208), e("t3.medium", 0.0416),
    e("t3.large", 0.0832), e("t3.xlarge", 0.1664), e("t3.2xlarge", 0.3328),
    // t3a
    e("t3a.nano", 0.0047), e("t3a.micro", 0.0094), e("t3a.small", 0.0188),
    e("t3a.medium", 0.0376), e("t3a.large", 0.0752), e("t3a.xlarge", 0.1504),
    e("t3a.2xlarge", 0.3008),
    // t4g
    e("t4g.nano", 0.0042), e("t4g.micro", 0.0084), e("t4g.small", 0.0168),
    e("t4g.medium", 0.0336), e("t4g.large", 0.0672), e("t4g.xlarge", 0.1344),
    e("t4g.2xlarge", 0.2688),
    // Compute optimised: c5
    e("c5.large", 0.085), e("c5.xlarge", 0.17), e("c5.2xlarge", 0.34), e("c5.4xlarge", 0.68),
    e("c5.9xlarge", 1.53), e("c5.12xlarge", 2.04), e("c5.18xlarge", 3.06),
    e("c5.24xlarge", 4.08),
    // c5n
    s("c5n.large", 0.108), s("c5n.xlarge", 0.216), s("c5n.2xlarge", 0.432),
    s("c5n.4xlarge", 0.864), s("c5n.9xlarge", 1.944), s("c5n.18xlarge", 3.888),
    s("c5n.metal", 3.888),
    // c6i
    e("c6i.large", 0.085), e("c6i.xlarge", 0.17), e("c6i.2xlarge", 0.34),
    e("c6i.4xlarge", 0.68), e("c6i.8xlarge", 1.36), s("c6i.12xlarge", 2.04),
    s("c6i.16xlarge", 2.72), s("c6i.24xlarge", 4.08), s("c6i.32xlarge", 5.44),
    // c6a
    e("c6a.large", 0.0765), e("c6a.xlarge", 0.153), e("c6a.2xlarge", 0.306),
    e("c6a.4xlarge", 0.612), s("c6a.8xlarge", 1.224), s("c6a.12xlarge", 1.836),
    s("c6a.16xlarge", 2.448), s("c6a.24xlarge", 3.672), s("c6a.32xlarge", 4.896),
    s("c6a.48xlarge", 7.344),
    // c6in
    s("c6in.large", 0.1134), s("c6in.xlarge", 0.2268), s("c6in.2xlarge", 0.4536),
    s("c6in.4xlarge", 0.9072), s("c6in.8xlarge", 1.8144), s("c6in.12xlarge", 2.7216),
    s("c6in.16xlarge", 3.6288), s("c6in.24xlarge", 5.4432), s("c6in.32xlarge", 7.2576),
    // c7i
    e("c7i.large", 0.08925), e("c7i.xlarge", 0.1785), e("c7i.2xlarge", 0.357),
    s("c7i.4xlarge", 0.714), s("c7i.8xlarge", 1.428), s("c7i.12xlarge", 2.142),
    s("c7i.16xlarge", 2.856), s("c7i.24xlarge", 4.284), s("c7i.48xlarge", 8.568),
    // c7a
    s("c7a.medium", 0.05132), s("c7a.large", 0.10264), s("c7a.xlarge", 0.20528),
    s("c7a.2xlarge", 0.41056), s("c7a.4xlarge", 0.82112), s("c7a.8xlarge", 1.64224),
    s("c7a.12xlarge", 2.46336), s("c7a.16xlarge", 3.28448), s("c7a.24xlarge", 4.92672),
    s("c7a.32xlarge", 6.56896), s("c7a.48xlarge", 9.85344),
    // c7g
    e("c7g.medium", 0.0363), e("c7g.large", 0.0725), e("c7g.xlarge", 0.145),
    e("c7g.2xlarge", 0.29), e("c7g.4xlarge", 0.58), e("c7g.8xlarge", 1.16),
    e("c7g.12xlarge", 1.74), e("c7g.16xlarge", 2.32),
    // General purpose: m5
    e("m5.large", 0.096), e("m5.xlarge", 0.192), e("m5.2xlarge", 0.384), e("m5.4xlarge", 0.768),
    e("m5.8xlarge", 1.536), e("m5.12xlarge", 2.304), e("m5.16xlarge", 3.072),
    e("m5.24xlarge", 4.608),
    // m6i
    e("m6i.large", 0.096), e("m6i.xlarge", 0.192), e("m6i.2xlarge", 0.384),
    e("m6i.4xlarge", 0.768), e("m6i.8xlarge", 1.536), e("m6i.12xlarge", 2.304),
    s("m6i.16xlarge", 3.072), s("m6i.24xlarge", 4.608), s("m6i.32xlarge", 6.144),
    // m6a
    e("m6a.large", 0.0864), e("m6a.xlarge", 0.1728), e("m6a.2xlarge", 0.3456),
    e("m6a.4xlarge", 0.6912), s("m6a.8xlarge", 1.3824), s("m6a.12xlarge", 2.0736),
    s("m6a.16xlarge", 2.7648), s("m6a.24xlarge", 4.1472), s("m6a.32xlarge", 5.5296),
    s("m6a.48xlarge", 8.2944),
    // m7i
    e("m7i.large", 0.1008), e("m7i.xlarge", 0.2016), e("m7i.2xlarge", 0.4032),
    e("m7i.4xlarge", 0.8064), s("m7i.8xlarge", 1.6128), s("m7i.12xlarge", 2.4192),
    s("m7i.16xlarge", 3.2256), s("m7i.24xlarge", 4.8384), s("m7i.48xlarge", 9.6768),
    // m7a
    s("m7a.medium", 0.05796), s("m7a.large", 0.11592), s("m7a.xlarge", 0.23184),
    s("m7a.2xlarge", 0.46368), s("m7a.4xlarge", 0.92736), s("m7a.8xlarge", 1.85472),
    s("m7a.12xlarge", 2.78208), s("m7a.16xlarge", 3.70944), s("m7a.24xlarge", 5.56416),
    s("m7a.32xlarge", 7.41888), s("m7a.48xlarge", 11.12832),
    // m7g
    e("m7g.medium", 0.0408), e("m7g.large", 0.0816), e("m7g.xlarge", 0.1632),
    e("m7g.2xlarge", 0.3264), e("m7g.4xlarge", 0.6528), e("m7g.8xlarge", 1.3056),
    e("m7g.12xlarge", 1.9584), e("m7g.16xlarge", 2.6112),
    // Memory optimised: r6i
    e("r6i.large", 0.126), e("r6i.xlarge", 0.252), e("r6i.2xlarge", 0.504),
    e("r6i.4xlarge", 1.008), e("r6i.8xlarge", 2.016), s("r6i.12xlarge", 3.024),
    s("r6i.16xlarge", 4.032), s("r6i.24xlarge", 6.048), s("r6i.32xlarge", 8.064),
    // r7i
    s("r7i.large", 0.1323), s("r7i.xlarge", 0.2646), s("r7i.2xlarge", 0.5292),
    s("r7i.4xlarge", 1.0584), s("r7i.8xlarge", 2.1168), s("r7i.12xlarge", 3.1752),
    s("r7i.16xlarge", 4.2336), s("r7i.24xlarge", 6.3504), s("r7i.48xlarge", 12.7008),
    // HPC (Graviton3E); the only HPC family offered in us-east-1
    e("hpc7g.4xlarge", 1.6832), e("hpc7g.8xlarge", 1.6832), e("hpc7g.16xlarge", 1.6832),
    // GPU training: p3 (V100), p4d/p4de (A100), p5 (H100), p5en (H200), p6-b200 (B200).
    // P4 and P5 rows carry the prices after AWS's 2025 reduction (p5.48xlarge was $98.32).
    e("p3.2xlarge", 3.06), e("p3.8xlarge", 12.24), e("p3.16xlarge", 24.48),
    s("p3dn.24xlarge", 31.212),
    e("p4d.24xlarge", 21.957642), e("p4de.24xlarge", 27.44705),
    e("p5.4xlarge", 6.88), e("p5.48xlarge", 55.04),
    e("p5en.48xlarge", 63.296),
    e("p6-b200.48xlarge", 113.9328),
    // GPU inference and visualisation: g4dn (T4), g5 (A10G), g6 (L4), g6e (L40S)
    e("g4dn.xlarge", 0.526), e("g4dn.2xlarge", 0.752), e("g4dn.4xlarge", 1.204),
    e("g4dn.8xlarge", 2.176), e("g4dn.12xlarge", 3.912), e("g4dn.16xlarge", 4.352),
    e("g4dn.metal", 7.824),
    // g5
    e("g5.xlarge", 1.006), e("g5.2xlarge", 1.212), e("g5.4xlarge", 1.624),
    e("g5.8xlarge", 2.448), e("g5.12xlarge", 5.672), e("g5.16xlarge", 4.096),
    e("g5.24xlarge", 8.144), e("g5.48xlarge", 16.288),
    // g6
    e("g6.xlarge", 0.8048), e("g6.2xlarge", 0.9776), e("g6.4xlarge", 1.3232),
    e("g6.8xlarge", 2.0144), e("g6.12xlarge", 4.6016), e("g6.16xlarge", 3.3968),
    e("g6.24xlarge", 6.6752), e("g6.48xlarge", 13.3504),
    // g6e
    e("g6e.xlarge", 1.861), e("g6e.2xlarge", 2.24208), e("g6e.4xlarge", 3.00424),
    e("g6e.8xlarge", 4.52856), e("g6e.12xlarge", 10.49264), e("g6e.16xlarge", 7.57719),
    e("g6e.24xlarge", 15.06559), e("g6e.48xlarge", 30.13118),
    // Trainium
    e("trn1.2xlarge", 1.34375), e("trn1.32xlarge", 21.5), e("trn1n.32xlarge", 24.78),
    // Inferentia2
    e("inf2.xlarge", 0.7582), e("inf2.8xlarge", 1.96786), e("inf2.24xlarge", 6.49063),
    e("inf2.48xlarge", 12.98127),
    // HPC families not offered in us-east-1: us-east-2 prices (see the module documentation).
    ohio("hpc6a.48xlarge", 2.88, true),
    ohio("hpc6id.32xlarge", 5.70, false), // single source
    // hpc7a: every size costs the same (fewer active cores, same memory and network).
    ohio("hpc7a.12xlarge", 7.20, false), // single source
    ohio("hpc7a.24xlarge", 7.20, false), // single source
    ohio("hpc7a.48xlarge", 7.20, false), // single source
    ohio("hpc7a.96xlarge", 7.20, false), // single source
];

/// The table row for `instance_type`, if the table has one. Exact, case-sensitive match.
pub fn table_price(instance_type: &str) -> Option<&'static TablePrice> {
    PRICE_TABLE.iter().find(|row| row.instance_type == instance_type)
}

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceSource {
    /// A price override from the provider configuration.
    Override,
    /// The embedded table; the row says which region and how well it is confirmed.
    Table(&'static TablePrice),
}

impl PriceSource {
    /// Short description for messages, e.g. "on-demand list price, us-east-1".
    pub fn describe(&self) -> String {
        match self {
            PriceSource::Override => "price override from the provider configuration".to_string(),
            PriceSource::Table(row) => format!("on-demand list price, {}", row.region),
        }
    }
}

/// The hourly price of `instance_type` and where it came from. See [`on_demand_price`].
pub fn price_with_source(instance_type: &str, overrides: &[(String, f64)]) -> Option<(f64, PriceSource)> {
    // The last override for a type wins, as a later setting usually does.
    if let Some((_, price)) = overrides.iter().rev().find(|(name, _)| name == instance_type) {
        // An override that is not a usable price (negative, NaN, infinite) makes the type
        // unpriced instead of silently falling back to the table: the user asked for a
        // different price, so the table's figure would be wrong either way.
        return (price.is_finite() && *price >= 0.0).then_some((*price, PriceSource::Override));
    }
    table_price(instance_type).map(|row| (row.usd_per_hour, PriceSource::Table(row)))
}

/// On-Demand Linux price of `instance_type` in USD per hour: the last override for that type
/// from the provider configuration if there is one, else the embedded table, else `None`.
///
/// An override that is negative, NaN or infinite yields `None` (the type is then reported by
/// [`unpriced`]), so a bad override never produces a plausible-looking estimate.
pub fn on_demand_price(instance_type: &str, overrides: &[(String, f64)]) -> Option<f64> {
    price_with_source(instance_type, overrides).map(|(price, _)| price)
}

/// Whether `name` matches the glob `pattern`, as users write in `allowed_instance_types`:
/// `*` matches any run of characters (including none, and including `.`), `?` matches exactly
/// one character, every other character matches itself. Case-sensitive; the whole name must
/// match. There is no escape syntax (instance type names never contain `*` or `?`).
///
/// ```text
/// p5.*          matches p5.48xlarge, p5.4xlarge        not p5en.48xlarge, p5e.48xlarge
/// g6e.*xlarge   matches g6e.xlarge, g6e.48xlarge       not g6.xlarge
/// c7i.?xlarge   matches c7i.2xlarge, c7i.8xlarge       not c7i.xlarge, c7i.12xlarge
/// ```
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0usize, 0usize);
    // Position just after the most recent `*`, and the name position it is currently
    // assumed to have consumed up to. Backtracking only ever needs the latest star, which
    // keeps this linear in practice and O(len(pattern) × len(name)) at worst.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                p += 1;
                star = Some((p, n));
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and retry from there.
                Some((after_star, consumed)) => {
                    p = after_star;
                    n = consumed + 1;
                    star = Some((after_star, consumed + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Whether `instance_type` is permitted by `allowed` (a list of globs, see [`glob_match`]).
/// An empty list allows every type.
pub fn instance_type_allowed(instance_type: &str, allowed: &[String]) -> bool {
    allowed.is_empty() || allowed.iter().any(|pattern| glob_match(pattern, instance_type))
}

/// What a cluster (or one partition) may use when every pool is scaled to its max nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub nodes: u64,
    pub vcpus: u64,
    pub gpus: u64,
    /// Estimated max hourly cost in USD; `None` when some instance type has no known price.
    pub hourly_cost: Option<f64>,
}

/// Sum of max nodes, vCPUs, GPUs and on-demand hourly cost over `pools`, each
/// `(instance type, max nodes, vCPUs per node, GPUs per node)`.
///
/// `hourly_cost` is `None` when a pool that can have nodes (max nodes > 0) uses a type with no
/// known price; a pool with max nodes 0 costs nothing whatever its type. Counts saturate at
/// `u64::MAX` rather than overflow.
pub fn max_usage(pools: &[(String, u32, u32, u32)], overrides: &[(String, f64)]) -> Usage {
    let mut usage = Usage {
        nodes: 0,
        vcpus: 0,
        gpus: 0,
        hourly_cost: Some(0.0),
    };
    for (instance_type, max_nodes, vcpus, gpus) in pools {
        let nodes = u64::from(*max_nodes);
        usage.nodes = usage.nodes.saturating_add(nodes);
        usage.vcpus = usage.vcpus.saturating_add(nodes * u64::from(*vcpus));
        usage.gpus = usage.gpus.saturating_add(nodes * u64::from(*gpus));
        if nodes > 0 {
            usage.hourly_cost = match (usage.hourly_cost, on_demand_price(instance_type, overrides)) {
                (Some(total), Some(price)) => Some(total + f64::from(*max_nodes) * price),
                _ => None,
            };
        }
    }
    usage
}

/// Instance types in `pools` (with max nodes > 0) that have no usable price, each once, in the
/// order they first appear, so the provider can warn that the cost estimate is unavailable and
/// suggest a price override.
pub fn unpriced(pools: &[(String, u32, u32, u32)], overrides: &[(String, f64)]) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for (instance_type, max_nodes, _, _) in pools {
        if *max_nodes > 0
            && on_demand_price(instance_type, overrides).is_none()
            && !missing.iter().any(|seen| seen == instance_type)
        {
            missing.push(instance_type.clone());
        }
    }
    missing
}

/// The `guardrails` block of the provider configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    /// Globs (see [`glob_match`]); empty means every instance type is allowed.
    pub allowed_instance_types: Vec<String>,
    pub max_nodes_per_partition: Option<u64>,
    pub max_vcpus_per_cluster: Option<u64>,
    pub max_gpus_per_cluster: Option<u64>,
    /// USD per hour.
    pub max_hourly_cost_per_cluster: Option<f64>,
    /// A partition past the account's EC2 vCPU quota is an error, not a warning.
    pub enforce_quotas: bool,
}

/// One guardrail a configuration would break.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    /// The guardrail attribute, e.g. `"max_gpus_per_cluster"`.
    pub what: &'static str,
    /// One line naming the partition or cluster and the numbers.
    pub summary: String,
    /// How the number was computed and what to change.
    pub detail: String,
}

/// Checks one partition against `allowed_instance_types` and `max_nodes_per_partition`.
/// Returns one breach per disallowed instance type (each type once) and at most one for the
/// node count. `max_nodes` equal to the limit is allowed.
pub fn check_partition(partition: &str, instance_types: &[String], max_nodes: u64, limits: &Limits) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for instance_type in instance_types {
        if seen.contains(&instance_type.as_str()) {
            continue;
        }
        seen.push(instance_type);
        if instance_type_allowed(instance_type, &limits.allowed_instance_types) {
            continue;
        }
        breaches.push(Breach {
            what: "allowed_instance_types",
            summary: format!(
                "partition {partition} uses instance type {instance_type}, which guardrail \
                 allowed_instance_types does not allow"
            ),
            detail: format!(
                "allowed_instance_types is {}; none of these patterns matches \"{instance_type}\" \
                 (patterns are case-sensitive, * matches any run of characters and ? exactly \
                 one). Use an allowed instance type in partition {partition}, or add a pattern \
                 such as \"{}\" to guardrails.allowed_instance_types.",
                quoted_list(&limits.allowed_instance_types),
                suggested_pattern(instance_type),
            ),
        });
    }
    if let Some(limit) = limits.max_nodes_per_partition {
        if max_nodes > limit {
            breaches.push(Breach {
                what: "max_nodes_per_partition",
                summary: format!(
                    "partition {partition} would allow {}; guardrail max_nodes_per_partition is \
                     {limit}",
                    count(max_nodes, "node", "nodes"),
                ),
                detail: format!(
                    "max_nodes of partition {partition} is {max_nodes}{}, above the limit of {}. \
                     Set max_nodes to {limit} or less, or raise \
                     guardrails.max_nodes_per_partition to at least {max_nodes}.",
                    if instance_types.is_empty() {
                        String::new()
                    } else {
                        format!(" (instance types: {})", instance_types.join(", "))
                    },
                    count(limit, "node", "nodes"),
                ),
            });
        }
    }
    breaches
}

/// Checks a cluster's totals (from [`max_usage`] over all its partitions) against
/// `max_vcpus_per_cluster`, `max_gpus_per_cluster` and `max_hourly_cost_per_cluster`.
/// Values equal to a limit are allowed. When `usage.hourly_cost` is `None` the cost guardrail
/// cannot be evaluated and is not reported as breached; the provider should warn with
/// [`unpriced`] instead (or use [`check_pools`], which also catches a breach by the priced
/// pools alone).
pub fn check_cluster(cluster: &str, usage: &Usage, limits: &Limits) -> Vec<Breach> {
    let scope = format!("cluster {cluster}");
    let mut breaches = Vec::new();
    let how = |per_node: &str| {
        format!(
            "the sum over all partitions of cluster {cluster} of max nodes × the instance \
             type's {per_node} per node ({} in total)",
            count(usage.nodes, "node", "nodes"),
        )
    };
    if let Some(breach) = count_breach(
        &scope,
        usage.vcpus,
        limits.max_vcpus_per_cluster,
        Resource::Vcpus,
        &how("vCPUs"),
        "Lower max_nodes in one or more partitions, or use smaller instance types,",
    ) {
        breaches.push(breach);
    }
    if let Some(breach) = count_breach(
        &scope,
        usage.gpus,
        limits.max_gpus_per_cluster,
        Resource::Gpus,
        &how("GPUs"),
        "Lower max_nodes in one or more GPU partitions, or use instance types with fewer GPUs,",
    ) {
        breaches.push(breach);
    }
    if let (Some(limit), Some(cost)) = (limits.max_hourly_cost_per_cluster, usage.hourly_cost) {
        if cost - limit > COST_EPSILON {
            breaches.push(Breach {
                what: "max_hourly_cost_per_cluster",
                summary: cost_summary(&scope, "up to", cost, limit),
                detail: format!(
                    "${} per hour is the sum over all partitions of cluster {cluster} of max \
                     nodes × the instance type's on-demand hourly price (the embedded list \
                     prices as of {PRICES_AS_OF}, {} where offered, unless overridden in the \
                     provider configuration): the cost \
                     if every partition scaled to its max_nodes at once. Lower max_nodes or use \
                     cheaper instance types so the estimate is at most ${} per hour, or raise \
                     guardrails.max_hourly_cost_per_cluster to at least {}.",
                    money(cost),
                    DEFAULT_REGION,
                    money(limit),
                    money(cost),
                ),
            });
        }
    }
    breaches
}

/// Like [`check_cluster`], but from the pools themselves, so the detail can show how each
/// total was computed ("8 nodes × 8 GPUs of p5.48xlarge"). `scope` names what the pools make
/// up and starts every summary, e.g. `"partition gpu"` (to show that one partition alone
/// exceeds a cluster guardrail) or `"cluster demo"`. Pools are
/// `(instance type, max nodes, vCPUs per node, GPUs per node)` as for [`max_usage`].
///
/// When some types are unpriced, a cost breach is still reported if the priced pools alone
/// exceed the limit ("at least $…"); otherwise the cost guardrail is left to the warning from
/// [`unpriced`].
pub fn check_pools(
    scope: &str,
    pools: &[(String, u32, u32, u32)],
    overrides: &[(String, f64)],
    limits: &Limits,
) -> Vec<Breach> {
    let usage = max_usage(pools, overrides);
    let mut breaches = Vec::new();
    for (resource, total, limit) in [
        (Resource::Vcpus, usage.vcpus, limits.max_vcpus_per_cluster),
        (Resource::Gpus, usage.gpus, limits.max_gpus_per_cluster),
    ] {
        if let Some(limit) = limit.filter(|l| total > *l) {
            breaches.push(pool_count_breach(scope, resource, total, limit, pools));
        }
    }
    if let Some(limit) = limits.max_hourly_cost_per_cluster {
        breaches.extend(cost_breach(scope, pools, overrides, limit));
    }
    breaches
}

/// A vCPU or GPU guardrail `limit` the pools' `total` passes, with how the total is made and
/// what to change.
fn pool_count_breach(
    scope: &str,
    resource: Resource,
    total: u64,
    limit: u64,
    pools: &[(String, u32, u32, u32)],
) -> Breach {
    let per_node = |pool: &(String, u32, u32, u32)| match resource {
        Resource::Vcpus => pool.2,
        Resource::Gpus => pool.3,
    };
    let contributing: Vec<&(String, u32, u32, u32)> =
        pools.iter().filter(|pool| pool.1 > 0 && per_node(pool) > 0).collect();
    let terms: Vec<String> = contributing
        .iter()
        .map(|pool| {
            format!(
                "{} × {} of {}",
                count(u64::from(pool.1), "node", "nodes"),
                count(u64::from(per_node(pool)), resource.singular(), resource.plural()),
                pool.0
            )
        })
        .collect();
    let how = format!("{} = {}", resource.amount(total), terms.join(" + "));
    let change = match contributing.as_slice() {
        [pool] => {
            let fit = limit / u64::from(per_node(pool)).max(1);
            if fit == 0 {
                format!(
                    "A single {} node already has {}; use an instance type with fewer {},",
                    pool.0,
                    resource.amount(u64::from(per_node(pool))),
                    resource.plural(),
                )
            } else {
                format!(
                    "Lower max_nodes for {} to {fit} or fewer ({fit} × {} = {}),",
                    pool.0,
                    per_node(pool),
                    resource.amount(fit * u64::from(per_node(pool))),
                )
            }
        }
        _ => format!("Lower max_nodes so the total is at most {},", resource.amount(limit)),
    };
    Breach {
        what: resource.guardrail(),
        summary: format!(
            "{scope} would allow {}; guardrail {} is {limit}",
            resource.amount(total),
            resource.guardrail()
        ),
        detail: format!(
            "{how}. {change} or raise guardrails.{} to at least {total}.",
            resource.guardrail()
        ),
    }
}

/// The cost guardrail, when the priced pools alone pass it.
fn cost_breach(
    scope: &str,
    pools: &[(String, u32, u32, u32)],
    overrides: &[(String, f64)],
    limit: f64,
) -> Option<Breach> {
    let mut known = 0.0;
    let mut terms = Vec::new();
    let missing = unpriced(pools, overrides);
    for (instance_type, max_nodes, _, _) in pools.iter().filter(|pool| pool.1 > 0) {
        if let Some((price, source)) = price_with_source(instance_type, overrides) {
            known += f64::from(*max_nodes) * price;
            terms.push(format!(
                "{} × ${}/h of {instance_type} ({})",
                count(u64::from(*max_nodes), "node", "nodes"),
                money(price),
                source.describe(),
            ));
        }
    }
    if known - limit <= COST_EPSILON {
        return None;
    }
    {
        let (qualifier, unpriced_note) = if missing.is_empty() {
            ("up to", String::new())
        } else {
            (
                "at least",
                format!(
                    " This does not count {}, which {} no known price.",
                    missing.join(", "),
                    if missing.len() == 1 { "has" } else { "have" },
                ),
            )
        };
        Some(Breach {
            what: "max_hourly_cost_per_cluster",
            summary: cost_summary(scope, qualifier, known, limit),
            detail: format!(
                "${}/h = {}.{unpriced_note} Lower max_nodes or use cheaper instance types so \
                 the estimate is at most ${} per hour, or raise \
                 guardrails.max_hourly_cost_per_cluster to at least {}.",
                money(known),
                terms.join(" + "),
                money(limit),
                money(known),
            ),
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Resource {
    Vcpus,
    Gpus,
}

impl Resource {
    fn guardrail(self) -> &'static str {
        match self {
            Resource::Vcpus => "max_vcpus_per_cluster",
            Resource::Gpus => "max_gpus_per_cluster",
        }
    }
    fn singular(self) -> &'static str {
        match self {
            Resource::Vcpus => "vCPU",
            Resource::Gpus => "GPU",
        }
    }
    fn plural(self) -> &'static str {
        match self {
            Resource::Vcpus => "vCPUs",
            Resource::Gpus => "GPUs",
        }
    }
    fn amount(self, n: u64) -> String {
        count(n, self.singular(), self.plural())
    }
}

/// A vCPU or GPU breach of a cluster guardrail, with `how` explaining the total.
fn count_breach(
    scope: &str,
    total: u64,
    limit: Option<u64>,
    resource: Resource,
    how: &str,
    change: &str,
) -> Option<Breach> {
    let limit = limit?;
    (total > limit).then(|| Breach {
        what: resource.guardrail(),
        summary: format!(
            "{scope} would allow {}; guardrail {} is {limit}",
            resource.amount(total),
            resource.guardrail()
        ),
        detail: format!(
            "{} is {how}. {change} so the total is at most {limit}, or raise guardrails.{} to at \
             least {total}.",
            resource.amount(total),
            resource.guardrail()
        ),
    })
}

fn cost_summary(scope: &str, qualifier: &str, cost: f64, limit: f64) -> String {
    format!(
        "{scope} would cost {qualifier} ${} per hour at on-demand prices; guardrail \
         max_hourly_cost_per_cluster is ${}",
        money(cost),
        money(limit)
    )
}

/// "1 node", "64 nodes".
fn count(n: u64, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// USD amount with at least two and at most five decimals: 440.32, 300.00, 0.0104, 21.95764.
fn money(amount: f64) -> String {
    let text = format!("{amount:.5}");
    let Some(dot) = text.find('.') else {
        return text;
    };
    let trimmed = text.trim_end_matches('0');
    let decimals = trimmed.len() - dot - 1;
    if decimals >= 2 {
        trimmed.to_string()
    } else {
        format!("{amount:.2}")
    }
}

/// `["p5.*", "g6e.*"]`.
fn quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// A pattern admitting the whole family of `instance_type`: "p5.48xlarge" → "p5.*".
fn suggested_pattern(instance_type: &str) -> String {
    match instance_type.split_once('.') {
        Some((family, _)) if !family.is_empty() => format!("{family}.*"),
        _ => instance_type.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    fn overrides(items: &[(&str, f64)]) -> Vec<(String, f64)> {
        items.iter().map(|(name, price)| (name.to_string(), *price)).collect()
    }

    fn pool(instance_type: &str, nodes: u32, vcpus: u32, gpus: u32) -> (String, u32, u32, u32) {
        (instance_type.to_string(), nodes, vcpus, gpus)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    // ---- price table -------------------------------------------------------------------

    #[test]
    fn table_rows_are_unique_well_formed_and_positive() {
        for (i, row) in PRICE_TABLE.iter().enumerate() {
            assert!(row.usd_per_hour.is_finite() && row.usd_per_hour > 0.0, "{row:?}");
            assert!(row.usd_per_hour < 200.0, "implausible price: {row:?}");
            let (family, size) = row.instance_type.split_once('.').expect("family.size");
            assert!(!family.is_empty() && !size.is_empty(), "{row:?}");
            assert!(
                row.instance_type
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'),
                "{row:?}"
            );
            assert!(row.region == "us-east-1" || row.region == "us-east-2", "{row:?}");
            assert!(
                PRICE_TABLE[i + 1..]
                    .iter()
                    .all(|other| other.instance_type != row.instance_type),
                "duplicate row for {}",
                row.instance_type
            );
        }
    }

    #[test]
    fn table_covers_the_families_the_brief_asks_for() {
        for t in [
            "p5.48xlarge",
            "p5en.48xlarge",
            "p4d.24xlarge",
            "p4de.24xlarge",
            "p3.2xlarge",
            "p3.8xlarge",
            "p3.16xlarge",
            "p3dn.24xlarge",
            "g4dn.xlarge",
            "g4dn.metal",
            "g5.xlarge",
            "g5.48xlarge",
            "g6.xlarge",
            "g6.48xlarge",
            "g6e.xlarge",
            "g6e.48xlarge",
            "trn1.2xlarge",
            "trn1.32xlarge",
            "trn1n.32xlarge",
            "inf2.xlarge",
            "inf2.48xlarge",
            "hpc6a.48xlarge",
            "hpc6id.32xlarge",
            "hpc7a.12xlarge",
            "hpc7a.96xlarge",
            "hpc7g.4xlarge",
            "hpc7g.16xlarge",
            "c5n.large",
            "c5n.18xlarge",
            "c5n.metal",
            "c6i.32xlarge",
            "c6a.48xlarge",
            "c7i.48xlarge",
            "c7a.48xlarge",
            "c7g.16xlarge",
            "m5.large",
            "m5.24xlarge",
            "m6i.24xlarge",
            "m7i.24xlarge",
            "r6i.32xlarge",
            "r7i.48xlarge",
            "t3.micro",
            "t3.small",
            "t3.medium",
            "t3.large",
            "t3.xlarge",
        ] {
            assert!(table_price(t).is_some(), "{t} missing from the table");
        }
    }

    #[test]
    fn table_spot_checks() {
        let p5 = table_price("p5.48xlarge").expect("p5");
        assert!(close(p5.usd_per_hour, 55.04));
        assert_eq!(p5.region, "us-east-1");
        assert!(p5.cross_checked);
        assert!(close(table_price("t3.micro").map_or(0.0, |r| r.usd_per_hour), 0.0104));
        assert!(close(
            table_price("hpc7g.16xlarge").map_or(0.0, |r| r.usd_per_hour),
            1.6832
        ));
        let hpc7a = table_price("hpc7a.96xlarge").expect("hpc7a");
        assert_eq!(hpc7a.region, "us-east-2");
        assert!(!hpc7a.cross_checked);
        assert!(!table_price("c7a.48xlarge").expect("c7a").cross_checked);
    }

    #[test]
    fn types_without_an_on_demand_list_price_are_left_out() {
        for t in [
            "p5e.48xlarge",
            "trn2.48xlarge",
            "trn2u.48xlarge",
            "P5.48xlarge",
            "",
            "p5",
        ] {
            assert!(table_price(t).is_none(), "{t}");
        }
    }

    #[test]
    fn cpu_families_keep_a_constant_price_per_size_unit() {
        // AWS prices every size of a CPU family at the same rate per vCPU; a mistyped row
        // would break that. Units: large = 1, xlarge = 2, Nxlarge = 2N, medium = 1/2 …
        let unit = |size: &str| -> Option<f64> {
            match size {
                "nano" => Some(0.0625),
                "micro" => Some(0.125),
                "small" => Some(0.25),
                "medium" => Some(0.5),
                "large" => Some(1.0),
                "xlarge" => Some(2.0),
                _ => size.strip_suffix("xlarge")?.parse::<f64>().ok().map(|n| 2.0 * n),
            }
        };
        for row in PRICE_TABLE {
            let (family, size) = row.instance_type.split_once('.').unwrap_or_default();
            let gpu_or_hpc = ["p", "g", "trn", "inf", "hpc"]
                .iter()
                .any(|prefix| family.starts_with(prefix));
            if gpu_or_hpc {
                continue;
            }
            let Some(units) = unit(size) else { continue };
            let base = PRICE_TABLE
                .iter()
                .find(|other| other.instance_type == format!("{family}.large"))
                .expect("every CPU family in the table has a large size");
            let expected = base.usd_per_hour * units;
            // AWS rounds sub-cent prices (c7g.medium is 0.0363, not 0.03625).
            assert!(
                (row.usd_per_hour - expected).abs() <= expected * 0.005,
                "{}: {} vs {expected}",
                row.instance_type,
                row.usd_per_hour
            );
        }
    }

    // ---- on_demand_price -------------------------------------------------------------

    #[test]
    fn price_from_table() {
        assert_eq!(on_demand_price("p4d.24xlarge", &[]), Some(21.957642));
        assert_eq!(on_demand_price("hpc6a.48xlarge", &[]), Some(2.88));
    }

    #[test]
    fn unknown_type_has_no_price() {
        assert_eq!(on_demand_price("x9.mega", &[]), None);
        assert_eq!(on_demand_price("p5e.48xlarge", &[]), None);
    }

    #[test]
    fn override_wins_over_table() {
        let o = overrides(&[("p5.48xlarge", 39.33)]);
        assert_eq!(on_demand_price("p5.48xlarge", &o), Some(39.33));
        assert_eq!(
            price_with_source("p5.48xlarge", &o).map(|(_, s)| s),
            Some(PriceSource::Override)
        );
        // Other types still come from the table.
        assert_eq!(on_demand_price("p4d.24xlarge", &o), Some(21.957642));
    }

    #[test]
    fn override_prices_a_type_the_table_lacks() {
        let o = overrides(&[("p5e.48xlarge", 43.26), ("trn2.48xlarge", 0.0)]);
        assert_eq!(on_demand_price("p5e.48xlarge", &o), Some(43.26));
        assert_eq!(on_demand_price("trn2.48xlarge", &o), Some(0.0), "zero is a valid price");
    }

    #[test]
    fn last_override_wins_and_matching_is_exact() {
        let o = overrides(&[("g5.xlarge", 1.0), ("g5.xlarge", 0.5), ("G5.XLARGE", 9.0)]);
        assert_eq!(on_demand_price("g5.xlarge", &o), Some(0.5));
        assert_eq!(on_demand_price("g5.2xlarge", &o), Some(1.212));
    }

    #[test]
    fn unusable_override_makes_the_type_unpriced() {
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let o = overrides(&[("p5.48xlarge", bad)]);
            assert_eq!(on_demand_price("p5.48xlarge", &o), None, "{bad}");
        }
    }

    #[test]
    fn source_description_names_region() {
        let (_, source) = price_with_source("hpc7a.48xlarge", &[]).expect("priced");
        assert_eq!(source.describe(), "on-demand list price, us-east-2");
    }

    // ---- glob_match --------------------------------------------------------------------

    #[test]
    fn glob_examples_from_users() {
        assert!(glob_match("p5.*", "p5.48xlarge"));
        assert!(glob_match("p5.*", "p5.4xlarge"));
        assert!(!glob_match("p5.*", "p5en.48xlarge"));
        assert!(!glob_match("p5.*", "p5e.48xlarge"));
        assert!(glob_match("g6e.*xlarge", "g6e.xlarge"));
        assert!(glob_match("g6e.*xlarge", "g6e.48xlarge"));
        assert!(!glob_match("g6e.*xlarge", "g6.xlarge"));
        assert!(!glob_match("g6e.*xlarge", "g6e.metal"));
        assert!(glob_match("c7i.?xlarge", "c7i.2xlarge"));
        assert!(glob_match("c7i.?xlarge", "c7i.8xlarge"));
        assert!(!glob_match("c7i.?xlarge", "c7i.xlarge"));
        assert!(!glob_match("c7i.?xlarge", "c7i.12xlarge"));
    }

    #[test]
    fn glob_exact_and_literal_characters() {
        assert!(glob_match("t3.micro", "t3.micro"));
        assert!(!glob_match("t3.micro", "t3.micros"));
        assert!(!glob_match("t3.micro", "t3.micr"));
        // `.` is literal, not "any character".
        assert!(!glob_match("p5.48xlarge", "p5x48xlarge"));
        // `-` is literal.
        assert!(glob_match("p6-*", "p6-b200.48xlarge"));
    }

    #[test]
    fn glob_is_case_sensitive() {
        assert!(!glob_match("P5.*", "p5.48xlarge"));
        assert!(!glob_match("p5.*", "P5.48XLARGE"));
    }

    #[test]
    fn glob_empty_and_star_only() {
        assert!(glob_match("", ""));
        assert!(!glob_match("", "t3.micro"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything.at.all"));
        assert!(glob_match("**", "x"));
        assert!(glob_match("***", ""));
        assert!(!glob_match("?", ""));
        assert!(glob_match("?", "x"));
        assert!(!glob_match("?", "xy"));
        assert!(!glob_match("t3.micro", ""));
    }

    #[test]
    fn glob_stars_anywhere_and_backtracking() {
        assert!(glob_match("*.metal", "g4dn.metal"));
        assert!(!glob_match("*.metal", "g4dn.metal-24xl"));
        assert!(glob_match("*.*xlarge", "c5n.18xlarge"));
        assert!(glob_match("c*", "c"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(glob_match("a*b*c", "abc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(glob_match("*a*a*a", "aaaa"));
        assert!(!glob_match("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
        assert!(glob_match("?*?", "ab"));
        assert!(!glob_match("?*?", "a"));
        assert!(glob_match("*xlarge*", "g6e.12xlarge"));
        assert!(glob_match("g?e.*", "g6e.xlarge"));
    }

    #[test]
    fn glob_counts_characters_not_bytes() {
        assert!(glob_match("?.x", "é.x"));
        assert!(!glob_match("??.x", "é.x"));
        assert!(glob_match("*é*", "aébc"));
    }

    #[test]
    fn allowed_list_semantics() {
        assert!(instance_type_allowed("p5.48xlarge", &[]), "empty list allows all");
        let allowed = strings(&["g6e.*", "c7i.?xlarge"]);
        assert!(instance_type_allowed("g6e.12xlarge", &allowed));
        assert!(instance_type_allowed("c7i.4xlarge", &allowed));
        assert!(!instance_type_allowed("p5.48xlarge", &allowed));
    }

    // ---- max_usage / unpriced ------------------------------------------------------------

    #[test]
    fn max_usage_sums_every_pool() {
        let pools = [pool("p5.48xlarge", 8, 192, 8), pool("c7i.48xlarge", 10, 192, 0)];
        let usage = max_usage(&pools, &[]);
        assert_eq!(usage.nodes, 18);
        assert_eq!(usage.vcpus, 18 * 192);
        assert_eq!(usage.gpus, 64);
        let expected = 8.0 * 55.04 + 10.0 * 8.568;
        assert!(close(usage.hourly_cost.unwrap_or(f64::NAN), expected));
    }

    #[test]
    fn max_usage_of_nothing_is_zero_and_free() {
        let usage = max_usage(&[], &[]);
        assert_eq!(
            usage,
            Usage {
                nodes: 0,
                vcpus: 0,
                gpus: 0,
                hourly_cost: Some(0.0)
            }
        );
    }

    #[test]
    fn unknown_price_makes_cost_unknown_but_counts_still_add_up() {
        let pools = [pool("p5.48xlarge", 2, 192, 8), pool("p5e.48xlarge", 1, 192, 8)];
        let usage = max_usage(&pools, &[]);
        assert_eq!(usage.hourly_cost, None);
        assert_eq!((usage.nodes, usage.vcpus, usage.gpus), (3, 576, 24));
        assert_eq!(unpriced(&pools, &[]), strings(&["p5e.48xlarge"]));
    }

    #[test]
    fn overrides_feed_max_usage_and_unpriced() {
        let pools = [pool("p5e.48xlarge", 2, 192, 8), pool("t3.micro", 1, 2, 0)];
        let o = overrides(&[("p5e.48xlarge", 40.0), ("t3.micro", 0.02)]);
        let usage = max_usage(&pools, &o);
        assert!(close(usage.hourly_cost.unwrap_or(f64::NAN), 80.02));
        assert!(unpriced(&pools, &o).is_empty());
    }

    #[test]
    fn zero_node_pools_cost_nothing_even_when_unpriced() {
        let pools = [pool("x9.mega", 0, 64, 0), pool("t3.micro", 1, 2, 0)];
        let usage = max_usage(&pools, &[]);
        assert!(close(usage.hourly_cost.unwrap_or(f64::NAN), 0.0104));
        assert!(unpriced(&pools, &[]).is_empty());
    }

    #[test]
    fn unpriced_lists_each_type_once_in_first_seen_order() {
        let pools = [
            pool("zz.large", 1, 2, 0),
            pool("t3.micro", 1, 2, 0),
            pool("aa.large", 1, 2, 0),
            pool("zz.large", 3, 2, 0),
        ];
        assert_eq!(unpriced(&pools, &[]), strings(&["zz.large", "aa.large"]));
    }

    #[test]
    fn max_usage_does_not_overflow() {
        let pools = [
            pool("x", u32::MAX, u32::MAX, u32::MAX),
            pool("y", u32::MAX, u32::MAX, 1),
        ];
        let usage = max_usage(&pools, &overrides(&[("x", 1.0), ("y", 1.0)]));
        assert_eq!(usage.nodes, 2 * u64::from(u32::MAX));
        assert_eq!(usage.vcpus, u64::MAX, "saturates");
        assert!(usage.hourly_cost.is_some_and(|c| c.is_finite()));
    }

    // ---- check_partition ----------------------------------------------------------------

    fn limits() -> Limits {
        Limits {
            allowed_instance_types: strings(&["g6e.*", "c7i.?xlarge", "t3.*"]),
            max_nodes_per_partition: Some(32),
            max_vcpus_per_cluster: Some(4096),
            max_gpus_per_cluster: Some(32),
            max_hourly_cost_per_cluster: Some(300.0),
            enforce_quotas: false,
        }
    }

    #[test]
    fn partition_within_guardrails_passes() {
        let breaches = check_partition("gpu", &strings(&["g6e.12xlarge"]), 32, &limits());
        assert!(breaches.is_empty(), "{breaches:?}");
    }

    #[test]
    fn no_guardrails_means_no_breaches() {
        let breaches = check_partition("gpu", &strings(&["p5.48xlarge"]), 100_000, &Limits::default());
        assert!(breaches.is_empty());
    }

    #[test]
    fn disallowed_type_is_named_with_a_suggested_pattern() {
        let breaches = check_partition("gpu", &strings(&["g6e.xlarge", "p5.48xlarge"]), 4, &limits());
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        let breach = &breaches[0];
        assert_eq!(breach.what, "allowed_instance_types");
        assert_eq!(
            breach.summary,
            "partition gpu uses instance type p5.48xlarge, which guardrail \
             allowed_instance_types does not allow"
        );
        assert!(
            breach.detail.contains(r#"["g6e.*", "c7i.?xlarge", "t3.*"]"#),
            "{}",
            breach.detail
        );
        assert!(breach.detail.contains(r#"such as "p5.*""#), "{}", breach.detail);
    }

    #[test]
    fn each_disallowed_type_is_reported_once() {
        let types = strings(&["p5.48xlarge", "p4d.24xlarge", "p5.48xlarge"]);
        let breaches = check_partition("gpu", &types, 1, &limits());
        let named: Vec<&str> = breaches
            .iter()
            .map(|b| if b.summary.contains("p5.48xlarge") { "p5" } else { "p4d" })
            .collect();
        assert_eq!(named, ["p5", "p4d"]);
    }

    #[test]
    fn too_many_nodes_in_a_partition() {
        let breaches = check_partition("gpu", &strings(&["g6e.48xlarge"]), 64, &limits());
        assert_eq!(breaches.len(), 1);
        assert_eq!(breaches[0].what, "max_nodes_per_partition");
        assert_eq!(
            breaches[0].summary,
            "partition gpu would allow 64 nodes; guardrail max_nodes_per_partition is 32"
        );
        assert!(breaches[0].detail.contains("g6e.48xlarge"));
        assert!(breaches[0].detail.contains("Set max_nodes to 32 or less"));
        assert!(breaches[0].detail.contains("at least 64"));
    }

    #[test]
    fn node_limit_is_inclusive() {
        assert!(check_partition("cpu", &strings(&["t3.micro"]), 32, &limits()).is_empty());
        let one = Limits {
            max_nodes_per_partition: Some(0),
            ..Limits::default()
        };
        let breaches = check_partition("cpu", &[], 1, &one);
        assert_eq!(
            breaches[0].summary,
            "partition cpu would allow 1 node; guardrail max_nodes_per_partition is 0"
        );
    }

    #[test]
    fn both_kinds_of_partition_breach_together() {
        let breaches = check_partition("gpu", &strings(&["p5.48xlarge"]), 33, &limits());
        let what: Vec<&str> = breaches.iter().map(|b| b.what).collect();
        assert_eq!(what, ["allowed_instance_types", "max_nodes_per_partition"]);
    }

    // ---- check_cluster ------------------------------------------------------------------

    #[test]
    fn cluster_within_guardrails_passes() {
        let usage = Usage {
            nodes: 10,
            vcpus: 4096,
            gpus: 32,
            hourly_cost: Some(300.0),
        };
        assert!(check_cluster("demo", &usage, &limits()).is_empty());
    }

    #[test]
    fn cluster_breaches_every_total() {
        let usage = Usage {
            nodes: 40,
            vcpus: 7680,
            gpus: 64,
            hourly_cost: Some(440.32),
        };
        let breaches = check_cluster("demo", &usage, &limits());
        let what: Vec<&str> = breaches.iter().map(|b| b.what).collect();
        assert_eq!(
            what,
            [
                "max_vcpus_per_cluster",
                "max_gpus_per_cluster",
                "max_hourly_cost_per_cluster"
            ]
        );
        assert_eq!(
            breaches[0].summary,
            "cluster demo would allow 7680 vCPUs; guardrail max_vcpus_per_cluster is 4096"
        );
        assert_eq!(
            breaches[1].summary,
            "cluster demo would allow 64 GPUs; guardrail max_gpus_per_cluster is 32"
        );
        assert!(
            breaches[1].detail.contains("40 nodes in total"),
            "{}",
            breaches[1].detail
        );
        assert!(breaches[1].detail.contains("at least 64"));
        assert_eq!(
            breaches[2].summary,
            "cluster demo would cost up to $440.32 per hour at on-demand prices; guardrail \
             max_hourly_cost_per_cluster is $300.00"
        );
        assert!(breaches[2].detail.contains("us-east-1"));
    }

    #[test]
    fn unknown_cost_is_not_a_cost_breach() {
        let usage = Usage {
            nodes: 1,
            vcpus: 2,
            gpus: 0,
            hourly_cost: None,
        };
        assert!(check_cluster("demo", &usage, &limits()).is_empty());
    }

    #[test]
    fn cost_comparison_ignores_float_noise() {
        let usage = max_usage(&[pool("p5.48xlarge", 8, 192, 8)], &[]);
        let at_cost = Limits {
            max_hourly_cost_per_cluster: Some(440.32),
            ..Limits::default()
        };
        assert!(check_cluster("demo", &usage, &at_cost).is_empty());
        let just_under = Limits {
            max_hourly_cost_per_cluster: Some(440.31),
            ..Limits::default()
        };
        assert_eq!(check_cluster("demo", &usage, &just_under).len(), 1);
    }

    // ---- check_pools --------------------------------------------------------------------

    #[test]
    fn partition_alone_exceeding_the_gpu_guardrail() {
        let breaches = check_pools(
            "partition gpu",
            &[pool("p5.48xlarge", 8, 192, 8)],
            &[],
            &Limits {
                max_gpus_per_cluster: Some(32),
                ..Limits::default()
            },
        );
        assert_eq!(breaches.len(), 1);
        assert_eq!(breaches[0].what, "max_gpus_per_cluster");
        assert_eq!(
            breaches[0].summary,
            "partition gpu would allow 64 GPUs; guardrail max_gpus_per_cluster is 32"
        );
        assert_eq!(
            breaches[0].detail,
            "64 GPUs = 8 nodes × 8 GPUs of p5.48xlarge. Lower max_nodes for p5.48xlarge to 4 or \
             fewer (4 × 8 = 32 GPUs), or raise guardrails.max_gpus_per_cluster to at least 64."
        );
    }

    #[test]
    fn pools_breakdown_lists_every_contributing_pool() {
        let pools = [
            pool("p5.48xlarge", 8, 192, 8),
            pool("g6e.12xlarge", 4, 48, 4),
            pool("c7i.48xlarge", 16, 192, 0),
        ];
        let only_gpus = Limits {
            max_gpus_per_cluster: Some(32),
            ..Limits::default()
        };
        let breaches = check_pools("cluster demo", &pools, &[], &only_gpus);
        assert_eq!(
            breaches[0].detail,
            "80 GPUs = 8 nodes × 8 GPUs of p5.48xlarge + 4 nodes × 4 GPUs of g6e.12xlarge. \
             Lower max_nodes so the total is at most 32 GPUs, or raise \
             guardrails.max_gpus_per_cluster to at least 80."
        );
    }

    #[test]
    fn pools_single_node_already_too_big() {
        let breaches = check_pools(
            "partition gpu",
            &[pool("p5.48xlarge", 1, 192, 8)],
            &[],
            &Limits {
                max_gpus_per_cluster: Some(4),
                ..Limits::default()
            },
        );
        assert!(breaches[0]
            .detail
            .contains("A single p5.48xlarge node already has 8 GPUs"));
    }

    #[test]
    fn pools_vcpu_and_cost_breakdown() {
        let pools = [pool("c7i.48xlarge", 32, 192, 0)];
        let breaches = check_pools("partition cpu", &pools, &[], &limits());
        let what: Vec<&str> = breaches.iter().map(|b| b.what).collect();
        assert_eq!(what, ["max_vcpus_per_cluster"], "32 × 8.568 = 274.18 is under $300");
        assert!(breaches[0]
            .detail
            .starts_with("6144 vCPUs = 32 nodes × 192 vCPUs of c7i.48xlarge."));

        let pools = [pool("p5.48xlarge", 8, 192, 8)];
        let cost_only = Limits {
            max_hourly_cost_per_cluster: Some(300.0),
            ..Limits::default()
        };
        let breaches = check_pools("partition gpu", &pools, &[], &cost_only);
        assert_eq!(breaches.len(), 1);
        assert_eq!(
            breaches[0].summary,
            "partition gpu would cost up to $440.32 per hour at on-demand prices; guardrail \
             max_hourly_cost_per_cluster is $300.00"
        );
        assert!(
            breaches[0]
                .detail
                .starts_with("$440.32/h = 8 nodes × $55.04/h of p5.48xlarge (on-demand list price, us-east-1)."),
            "{}",
            breaches[0].detail
        );
    }

    #[test]
    fn pools_cost_uses_overrides_and_says_so() {
        let o = overrides(&[("p5.48xlarge", 39.33)]);
        let cost_only = Limits {
            max_hourly_cost_per_cluster: Some(300.0),
            ..Limits::default()
        };
        let breaches = check_pools("partition gpu", &[pool("p5.48xlarge", 8, 192, 8)], &o, &cost_only);
        assert!(breaches[0].summary.contains("$314.64"));
        assert!(breaches[0]
            .detail
            .contains("price override from the provider configuration"));
        let roomy = Limits {
            max_hourly_cost_per_cluster: Some(320.0),
            ..Limits::default()
        };
        assert!(check_pools("partition gpu", &[pool("p5.48xlarge", 8, 192, 8)], &o, &roomy).is_empty());
    }

    #[test]
    fn pools_priced_part_alone_can_breach_the_cost_guardrail() {
        let pools = [pool("p5.48xlarge", 8, 192, 8), pool("p5e.48xlarge", 8, 192, 8)];
        let cost_only = Limits {
            max_hourly_cost_per_cluster: Some(300.0),
            ..Limits::default()
        };
        let breaches = check_pools("cluster demo", &pools, &[], &cost_only);
        assert_eq!(breaches.len(), 1);
        assert!(breaches[0].summary.contains("would cost at least $440.32 per hour"));
        assert!(breaches[0]
            .detail
            .contains("This does not count p5e.48xlarge, which has no known price."));
        // Below the limit with an unpriced type: left to the unpriced() warning.
        let roomy = Limits {
            max_hourly_cost_per_cluster: Some(1000.0),
            ..Limits::default()
        };
        assert!(check_pools("cluster demo", &pools, &[], &roomy).is_empty());
    }

    // ---- helpers ------------------------------------------------------------------------

    #[test]
    fn money_formatting() {
        assert_eq!(money(440.32000000000005), "440.32");
        assert_eq!(money(300.0), "300.00");
        assert_eq!(money(0.0104), "0.0104");
        assert_eq!(money(21.957642), "21.95764");
        assert_eq!(money(7.2), "7.20");
        assert_eq!(money(0.0), "0.00");
    }

    #[test]
    fn suggested_patterns() {
        assert_eq!(suggested_pattern("p5.48xlarge"), "p5.*");
        assert_eq!(suggested_pattern("p6-b200.48xlarge"), "p6-b200.*");
        assert_eq!(suggested_pattern("weird"), "weird");
        assert_eq!(suggested_pattern(".x"), ".x");
    }
}
