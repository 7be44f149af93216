//! Names and descriptions from small word lists, all in NACHA's character set
//! (upper-case ASCII) and within their fields' lengths.

use tranche_ach::{check_digit, RoutingNumber};

use super::rng::Rng;

pub(crate) const FIRST_NAMES: [&str; 48] = [
    "JAMES",
    "MARY",
    "ROBERT",
    "PATRICIA",
    "JOHN",
    "JENNIFER",
    "MICHAEL",
    "LINDA",
    "DAVID",
    "ELIZABETH",
    "WILLIAM",
    "BARBARA",
    "RICHARD",
    "SUSAN",
    "JOSEPH",
    "JESSICA",
    "THOMAS",
    "SARAH",
    "CARLOS",
    "KAREN",
    "DANIEL",
    "LISA",
    "MATTHEW",
    "NANCY",
    "ANTHONY",
    "BETTY",
    "MARK",
    "SANDRA",
    "WEI",
    "ASHLEY",
    "PRIYA",
    "KIMBERLY",
    "STEVEN",
    "EMILY",
    "PAUL",
    "DONNA",
    "ANDREW",
    "MICHELLE",
    "KEVIN",
    "CAROL",
    "BRIAN",
    "AMANDA",
    "GEORGE",
    "MELISSA",
    "AHMED",
    "DEBORAH",
    "LUIS",
    "FATIMA",
];

pub(crate) const LAST_NAMES: [&str; 48] = [
    "SMITH",
    "JOHNSON",
    "WILLIAMS",
    "BROWN",
    "JONES",
    "GARCIA",
    "MILLER",
    "DAVIS",
    "RODRIGUEZ",
    "MARTINEZ",
    "HERNANDEZ",
    "LOPEZ",
    "GONZALEZ",
    "WILSON",
    "ANDERSON",
    "THOMAS",
    "TAYLOR",
    "MOORE",
    "JACKSON",
    "MARTIN",
    "LEE",
    "PEREZ",
    "THOMPSON",
    "WHITE",
    "HARRIS",
    "SANCHEZ",
    "CLARK",
    "RAMIREZ",
    "LEWIS",
    "ROBINSON",
    "WALKER",
    "YOUNG",
    "ALLEN",
    "KING",
    "WRIGHT",
    "SCOTT",
    "TORRES",
    "NGUYEN",
    "HILL",
    "FLORES",
    "GREEN",
    "ADAMS",
    "NELSON",
    "BAKER",
    "HALL",
    "RIVERA",
    "CAMPBELL",
    "O'BRIEN",
];

/// The large employers: a few payrolls of tens of thousands each.
pub(crate) const LARGE_EMPLOYERS: [&str; 12] = [
    "GLOBEX CORP",
    "INITECH INC",
    "UMBRELLA HEALTH",
    "STARK LOGISTICS",
    "WAYNE RETAIL",
    "CYBERDYNE SYS",
    "SOYLENT FOODS",
    "HOOLI",
    "MASSIVE DYNAMIC",
    "TYRELL CORP",
    "VANDELAY IND",
    "WONKA CONFECTION",
];

const ADJECTIVES: [&str; 24] = [
    "BLUE", "RED", "OAK", "PINE", "NORTH", "SOUTH", "EAST", "WEST", "GOLD", "SILVER", "IRON",
    "CEDAR", "MAPLE", "RIVER", "LAKE", "HILL", "SUN", "STAR", "BRIGHT", "FIRST", "PRIME", "SUMMIT",
    "HARBOR", "VALLEY",
];

const NOUNS: [&str; 20] = [
    "BAKERY", "DENTAL", "AUTO", "CAFE", "FARMS", "PLUMBING", "ROOFING", "CLINIC", "MARKET",
    "DESIGN", "LABS", "MEDIA", "FITNESS", "TRAVEL", "GROCERY", "BREWING", "FLORIST", "PRINT",
    "SUPPLY", "FREIGHT",
];

const SUFFIXES: [&str; 4] = ["LLC", "INC", "CO", "LTD"];

/// What collections are for (WEB), at most 10 characters.
pub(crate) const WEB_DESCRIPTIONS: [&str; 6] = [
    "SUBSCRIPT",
    "LOAN PMT",
    "INSURANCE",
    "UTILITY",
    "MEMBERSHIP",
    "TUITION",
];

/// A person's name, at most 22 characters.
pub(crate) fn person(r: &mut Rng) -> String {
    let first = r.pick(&FIRST_NAMES);
    let last = r.pick(&LAST_NAMES);
    let name = format!("{first} {last}");
    if name.len() <= 22 {
        name
    } else {
        format!("{} {last}", &first[..1])
    }
}

/// A small business's name: `BLUE RIVER CAFE`, `OAK DENTAL LLC`, at most `max`.
pub(crate) fn business(r: &mut Rng, max: usize) -> String {
    let adjective = r.pick(&ADJECTIVES);
    let noun = r.pick(&NOUNS);
    let suffix = r.pick(&SUFFIXES);
    [
        format!("{adjective} {noun} {suffix}"),
        format!("{adjective} {noun}"),
        noun.to_string(),
    ]
    .into_iter()
    .find(|n| n.len() <= max)
    .expect("every noun fits")
}

/// A company identification: `1` and nine digits, as an EIN is written.
pub(crate) fn company_id(r: &mut Rng) -> String {
    format!("1{}", r.digits(9))
}

/// The receiving banks: a few large ones most receivers bank with, then a long tail
/// of generated routing numbers with valid district prefixes and check digits.
pub(crate) struct Rdfis(Vec<RoutingNumber>);

/// Real routing numbers of large banks (JPMorgan Chase, Bank of America, Wells
/// Fargo, Citibank).
const LARGE_RDFIS: [&str; 4] = ["021000021", "026009593", "121000248", "021000089"];

impl Rdfis {
    pub fn new(r: &mut Rng) -> Self {
        let mut all: Vec<RoutingNumber> = LARGE_RDFIS
            .iter()
            .map(|s| s.parse().expect("a valid routing number"))
            .collect();
        for _ in 0..400 {
            all.push(routing(r));
        }
        Rdfis(all)
    }

    /// A receiver's bank: the large banks take about half the receivers.
    pub fn pick(&self, r: &mut Rng) -> RoutingNumber {
        if r.chance(0.5) {
            self.0[r.below(LARGE_RDFIS.len() as u64) as usize]
        } else {
            *r.pick(&self.0[LARGE_RDFIS.len()..])
        }
    }
}

/// A routing number: a Federal Reserve district prefix (01-12 banks, 21-32 thrifts),
/// six digits, and the check digit.
pub(crate) fn routing(r: &mut Rng) -> RoutingNumber {
    let district = r.range(1, 12) + if r.chance(0.2) { 20 } else { 0 };
    let first8 = format!("{district:02}{}", r.digits(6));
    let check = check_digit(first8.as_bytes()).expect("digits");
    format!("{first8}{check}")
        .parse()
        .expect("a computed check digit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fit_their_fields_and_the_character_set() {
        let lists: [&[&str]; 6] = [
            &FIRST_NAMES,
            &LAST_NAMES,
            &LARGE_EMPLOYERS,
            &ADJECTIVES,
            &NOUNS,
            &WEB_DESCRIPTIONS,
        ];
        for word in lists.iter().flat_map(|l| l.iter()) {
            assert!(tranche_ach::is_nacha_text(word), "{word}");
        }
        assert!(LARGE_EMPLOYERS.iter().all(|n| n.len() <= 16));
        assert!(WEB_DESCRIPTIONS.iter().all(|n| n.len() <= 10));
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(person(&mut r).len() <= 22);
            assert!(business(&mut r, 16).len() <= 16);
            assert_eq!(company_id(&mut r).len(), 10);
            routing(&mut r); // parses: its check digit is right
        }
    }
}
