//! Server health: passive (failures seen by real traffic) and active (periodic HTTP checks).

pub mod active;
pub mod passive;
