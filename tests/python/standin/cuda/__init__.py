"""The `cuda` package of the cuda.core stand-in (see cuda/core/__init__.py).

`cuda` is a namespace shared by several distributions (cuda.bindings,
cuda.pathfinder, cuda.compute ...). This directory comes first on sys.path
and must take over `cuda.core` only: extend_path appends every other sys.path
entry's cuda/ directory, so the rest of the namespace still imports from
where it is installed. A regular package (not a namespace one) so that it wins
even over an installation whose cuda/ has an __init__.py.
"""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)
