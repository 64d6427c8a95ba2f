"""The chain family: one conditional tree per column, ``p(x) = prod_t p(x_t | x_<t)``
(synthpop's sequential CART as a density; :class:`~forestgen.families.chain.chain.Chain`)."""

from forestgen.families.chain.chain import Chain

__all__ = ["Chain"]
