# SPDX-License-Identifier: GPL-2.0
"""libibverbs' and librdmacm's constants the way pyverbs.enums gives them
(e.IBV_MTU_1024, e.IBV_WC_SUCCESS, e.RDMA_PS_TCP ...), whichever pyverbs
the platform has: rdma-core 65 (sid) replaced the module pyverbs.enums by
pyverbs.libibverbs_enums and pyverbs.librdmacm_enums, whose constants are
members of enum classes (libibverbs_enums.ibv_mtu.IBV_MTU_1024, IntEnum or
IntFlag, so they compare, hash and combine as the plain ints before).

Suites import it as `import verbs_enums as e`; a script they run with
`python3 -c` first puts the suites' directory ($SRNIC_REPO/tests) on
sys.path.
"""
import enum

try:
    import pyverbs.enums as _flat
except ImportError:
    _flat = None

if _flat is not None:
    # All but the module's own dunders: some constants start with "_"
    # (_IBV_ADVISE_MR_ADVICE_PREFETCH).
    globals().update({name: getattr(_flat, name) for name in dir(_flat)
                      if not name.startswith("__")})
else:
    import pyverbs.libibverbs_enums as _ibv
    import pyverbs.librdmacm_enums as _rdmacm
    for _mod in (_ibv, _rdmacm):
        for _name in dir(_mod):
            _value = getattr(_mod, _name)
            if isinstance(_value, type) and issubclass(_value, enum.Enum):
                for _member_name, _member in _value.__members__.items():
                    globals().setdefault(_member_name, _member)
            elif _name.isupper():
                globals().setdefault(_name, _value)
