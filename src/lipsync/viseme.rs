//! The viseme set (Meta/Oculus's 15) and the mouth pose each one aims for.
//!
//! Input: a [`Viseme`]. Output: its target [`MouthPose`] and its Rhubarb letter.
//! Invariant: every target pose is already inside the documented [`MouthPose`] ranges.

use super::pose::MouthPose;

/// Mouth-shape classes, Meta's 15 visemes (a superset of Rhubarb's A–H + X: see the module docs
/// of [`crate::lipsync`] for the correspondence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Viseme {
    /// Silence, relaxed closed lips (Rhubarb X).
    Sil,
    /// p, b, m: lips pressed together (Rhubarb A).
    Pp,
    /// f, v: lower lip under the upper teeth (Rhubarb G).
    Ff,
    /// θ, ð: tongue tip between the teeth.
    Th,
    /// t, d, ɾ: slightly open, tongue behind the teeth.
    Dd,
    /// k, g, ŋ: open, back of the tongue raised.
    Kk,
    /// ʃ, ʒ, tʃ, dʒ: lips pushed forward, teeth visible.
    Ch,
    /// s, z: teeth almost closed, lips spread (Rhubarb B).
    Ss,
    /// n, l: slightly open, tongue up (Rhubarb H for l).
    Nn,
    /// ɹ, ɚ, ɜ: slightly rounded (Rhubarb E).
    Rr,
    /// ɑ, a, æ, ʌ: wide open (Rhubarb D).
    Aa,
    /// ɛ, e, ə, ɐ: mid open (Rhubarb C).
    E,
    /// ɪ, i, j: small opening, spread lips (Rhubarb B).
    Ih,
    /// ɔ, o: rounded open (Rhubarb E).
    Oh,
    /// ʊ, u, w: puckered (Rhubarb F).
    Ou,
}

impl Viseme {
    /// All visemes, for tables and tests.
    pub const ALL: [Viseme; 15] = [
        Viseme::Sil,
        Viseme::Pp,
        Viseme::Ff,
        Viseme::Th,
        Viseme::Dd,
        Viseme::Kk,
        Viseme::Ch,
        Viseme::Ss,
        Viseme::Nn,
        Viseme::Rr,
        Viseme::Aa,
        Viseme::E,
        Viseme::Ih,
        Viseme::Oh,
        Viseme::Ou,
    ];

    /// The nearest Rhubarb Lip Sync mouth letter (A–H, X), useful for debugging output.
    pub fn rhubarb(self) -> char {
        match self {
            Viseme::Sil => 'X',
            Viseme::Pp => 'A',
            Viseme::Ff => 'G',
            Viseme::Ss | Viseme::Ih | Viseme::Dd | Viseme::Th | Viseme::Ch => 'B',
            Viseme::E | Viseme::Kk => 'C',
            Viseme::Aa => 'D',
            Viseme::Oh | Viseme::Rr => 'E',
            Viseme::Ou => 'F',
            Viseme::Nn => 'H',
        }
    }

    /// The target pose (fully stressed; the planner scales vowel opening by stress).
    pub fn pose(self) -> MouthPose {
        // Columns: open, width, round, upper_lip, lower_lip_tuck, teeth, tongue.
        let p = |open, width, round, upper_lip, lower_lip_tuck, teeth, tongue| MouthPose {
            open,
            width,
            round,
            upper_lip,
            lower_lip_tuck,
            teeth,
            tongue,
        };
        match self {
            Viseme::Sil => MouthPose::REST,
            Viseme::Pp => p(0.0, -0.05, 0.0, 0.0, 0.25, 0.0, 0.0),
            Viseme::Ff => p(0.08, 0.0, 0.0, 0.55, 1.0, 1.0, 0.0),
            Viseme::Th => p(0.25, 0.05, 0.0, 0.15, 0.0, 0.8, 0.9),
            Viseme::Dd => p(0.22, 0.1, 0.0, 0.1, 0.0, 0.8, 0.3),
            Viseme::Kk => p(0.32, 0.05, 0.0, 0.05, 0.0, 0.6, 0.1),
            Viseme::Ch => p(0.2, -0.7, 0.6, 0.25, 0.0, 1.0, 0.0),
            Viseme::Ss => p(0.1, 0.55, 0.0, 0.15, 0.0, 1.0, 0.0),
            Viseme::Nn => p(0.2, 0.1, 0.0, 0.05, 0.0, 0.6, 0.6),
            Viseme::Rr => p(0.22, -0.7, 0.55, 0.05, 0.0, 0.4, 0.0),
            Viseme::Aa => p(1.0, 0.1, 0.0, 0.2, 0.0, 0.7, 0.2),
            Viseme::E => p(0.6, 0.35, 0.0, 0.15, 0.0, 0.8, 0.1),
            Viseme::Ih => p(0.35, 0.8, 0.0, 0.15, 0.0, 0.9, 0.0),
            Viseme::Oh => p(0.62, -0.8, 0.75, 0.0, 0.0, 0.3, 0.0),
            Viseme::Ou => p(0.3, -0.95, 1.0, 0.0, 0.0, 0.1, 0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_in_range_and_distinct() {
        for v in Viseme::ALL {
            let p = v.pose();
            assert_eq!(p, p.clamped(), "{v:?} pose out of range");
        }
        for (i, a) in Viseme::ALL.iter().enumerate() {
            for b in &Viseme::ALL[i + 1..] {
                assert!(
                    a.pose().distance(&b.pose()) > 0.04,
                    "{a:?} and {b:?} look the same"
                );
            }
        }
    }

    #[test]
    fn only_bilabials_and_silence_seal_the_lips() {
        for v in Viseme::ALL {
            let sealed = v.pose().open == 0.0;
            assert_eq!(sealed, matches!(v, Viseme::Pp | Viseme::Sil), "{v:?}");
        }
    }
}
