//! Resources: typed values a tool receives from the agent that runs it (a database pool, an HTTP
//! client, a configuration), never serialised and never part of a run's state.
//!
//! A tool says which resources it needs ([`Tool::needs_resource`](crate::Tool::needs_resource), or a
//! `Res<T>` parameter of a `#[tool]` function); the agent holds them
//! ([`AgentBuilder::resource`](crate::AgentBuilder::resource)); `build()` refuses an agent that lacks
//! one, naming the tool and the type; a call gets them through its context.

use std::any::{Any, TypeId, type_name};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared resource, as a tool receives it: a cheap handle (one `Arc`) that dereferences to `T`.
///
/// Take one as a parameter of a `#[tool]` function (`db: Res<Pool>`), or ask the call's context
/// for it ([`ToolContext::resource`](crate::ToolContext::resource)). In a unit test, make one with
/// [`Res::new`] and call the function directly.
///
/// ```
/// use phaseo_agent::Res;
///
/// struct Config { region: String }
///
/// let config = Res::new(Config { region: "eu-west-1".into() });
/// let shared = config.clone();                 // the same value, not a copy
/// assert_eq!(shared.region, "eu-west-1");      // `Res<T>` dereferences to `T`
/// assert!(Res::ptr_eq(&config, &shared));
/// ```
pub struct Res<T: ?Sized>(Arc<T>);

impl<T> Res<T> {
    /// A resource holding `value`.
    pub fn new(value: T) -> Self {
        Res(Arc::new(value))
    }
}

impl<T: ?Sized> Res<T> {
    /// The shared value, as an `Arc` (to keep it past the call, or hand it to a spawned task).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use phaseo_agent::Res;
    ///
    /// let name: Arc<String> = Res::new("pool".to_owned()).into_arc();
    /// assert_eq!(*name, "pool");
    /// ```
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }

    /// Whether two handles share one value.
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        Arc::ptr_eq(&this.0, &other.0)
    }
}

impl<T: ?Sized> From<Arc<T>> for Res<T> {
    fn from(value: Arc<T>) -> Self {
        Res(value)
    }
}

impl<T: ?Sized> Clone for Res<T> {
    fn clone(&self) -> Self {
        Res(self.0.clone())
    }
}

impl<T: ?Sized> Deref for Res<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> AsRef<T> for Res<T> {
    fn as_ref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Res<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Res").field(&&*self.0).finish()
    }
}

/// A type, by id and by name: a resource a tool needs ([`Need`]), or a tool's input type.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeKey {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
}

/// A resource a tool needs.
pub(crate) type Need = TypeKey;

impl TypeKey {
    pub(crate) fn of<T: Any>() -> Self {
        TypeKey {
            id: TypeId::of::<T>(),
            name: type_name::<T>(),
        }
    }
}

impl fmt::Debug for TypeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The resources of an agent (or of any set of tools): at most one value per type.
///
/// Cheap to clone (one `Arc`). An agent's builder fills one for you
/// ([`AgentBuilder::resource`](crate::AgentBuilder::resource)); build one yourself to share the
/// same values between agents, or to give a detached context resources in a unit test.
///
/// ```
/// use phaseo_agent::Resources;
///
/// struct Pool { size: usize }
///
/// let resources = Resources::new().with(Pool { size: 4 }).with("eu-west-1".to_owned());
/// assert_eq!(resources.get::<Pool>().map(|pool| pool.size), Some(4));
/// assert_eq!(resources.get::<String>().as_deref().map(String::as_str), Some("eu-west-1"));
/// assert!(resources.get::<u32>().is_none());
/// assert_eq!(resources.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct Resources {
    // Few entries: a linear scan over type ids beats hashing them.
    entries: Arc<Vec<Entry>>,
}

#[derive(Clone)]
struct Entry {
    need: Need,
    value: Arc<dyn Any + Send + Sync>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Self::default()
    }

    /// These resources and `value`, which replaces a value of the same type.
    pub fn with<T: Send + Sync + 'static>(self, value: T) -> Self {
        self.with_res(Res::new(value))
    }

    /// These resources and a value already shared elsewhere (its `Res` or `Arc`), which replaces
    /// a value of the same type.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use phaseo_agent::{Res, Resources};
    ///
    /// let shared = Arc::new(String::from("config"));
    /// let resources = Resources::new().with_res(shared.clone());
    /// assert!(Arc::ptr_eq(&resources.get::<String>().unwrap().into_arc(), &shared));
    /// ```
    pub fn with_res<T: Send + Sync + 'static>(mut self, value: impl Into<Res<T>>) -> Self {
        self.put(Entry {
            need: Need::of::<T>(),
            value: value.into().0,
        });
        self
    }

    /// Adds `entry`, replacing the value of the same type.
    fn put(&mut self, entry: Entry) {
        let entries = Arc::make_mut(&mut self.entries);
        match entries.iter_mut().find(|e| e.need.id == entry.need.id) {
            Some(slot) => *slot = entry,
            None => entries.push(entry),
        }
    }

    /// The value of type `T`, if there is one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Res<T>> {
        let id = TypeId::of::<T>();
        let entry = self.entries.iter().find(|e| e.need.id == id)?;
        entry.value.clone().downcast::<T>().ok().map(Res)
    }

    /// Whether there is a value of type `T`.
    pub fn contains<T: 'static>(&self) -> bool {
        self.has(TypeId::of::<T>())
    }

    /// Adds every value of `other`, replacing values of the same types.
    pub(crate) fn merge(mut self, other: &Resources) -> Self {
        for entry in other.entries.iter() {
            self.put(entry.clone());
        }
        self
    }

    #[inline]
    pub(crate) fn has(&self, id: TypeId) -> bool {
        self.entries.iter().any(|e| e.need.id == id)
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The type names of the values, for error messages.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.need.name).collect()
    }

    /// The first of `needs` these resources lack.
    #[inline]
    pub(crate) fn missing<'n>(&self, needs: &'n [Need]) -> Option<&'n Need> {
        needs.iter().find(|need| !self.has(need.id))
    }

    /// The error for a tool that needs `need` where these resources are all there is.
    pub(crate) fn missing_message(&self, need: &Need) -> String {
        let names = self.names();
        let have = if names.is_empty() {
            "it has none".to_owned()
        } else {
            format!("it has {}", names.join(", "))
        };
        format!(
            "it needs the resource `{}`, which the agent does not have ({have}); add it with `.resource(...)` on the agent's builder",
            need.name
        )
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| e.need))
            .finish()
    }
}
