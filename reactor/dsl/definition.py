"""``ReactorDefinition``: a validated reactor graph, built when a ``Reactor`` class is created.

:func:`build_definition` performs every definition check (docs/concepts.md, "Definition
errors"; ruby_reactor's ``validate_definition!``) and raises
:class:`~reactor.errors.DefinitionError` on:

* a reserved or private step name;
* ``result()``/``wait_for`` naming an unknown step (or the step itself);
* ``input()`` naming an undeclared reactor input;
* ``element()`` outside the ``args`` of the map it names;
* an argument a ``Step`` class (or child/element reactor) does not declare;
* a required input left unwired (wiring by name: a declared input with no argument takes the
  reactor input of the same name);
* a dependency cycle;
* ``returns`` naming no step, or naming an ``async_step``;
* a ``map_step`` whose element reactor (or a child it composes) declares an ``interrupt``
  (docs/run-control.md, "Interrupts": a map element cannot pause).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reactor.dsl.background import Background
from reactor.dsl.coordination import Coordination
from reactor.dsl.deadlines import declared_seconds
from reactor.dsl.declarations import StepSpec
from reactor.dsl.inputs import Input, InputContract
from reactor.dsl.on_failure import OnFailure, checked_on_failure
from reactor.dsl.templates import ElementRef, InputRef, ResultRef, Template
from reactor.errors import DefinitionError
from reactor.model import codec
from reactor.model.masking import mask_mapping

__all__ = [
    "RESERVED_STEP_NAMES",
    "ReactorDefinition",
    "attach_background",
    "attach_concurrency",
    "attach_deadline",
    "attach_on_failure",
    "build_definition",
]

#: Step names that would shadow ``Reactor`` class attributes.
RESERVED_STEP_NAMES: frozenset[str] = frozenset(
    {
        "run", "execute", "find", "undo", "cancel", "definition", "reactor_name", "returns",
        "mro", "coordination", "background", "max_concurrency", "deadline", "suspend",
        "unsuspend", "suspend_all", "unsuspend_all", "suspend_switch", "on_failure", "rewind",
        "fork",
    }
)


@dataclass(frozen=True)
class ReactorDefinition:
    """A reactor's validated structure (the engine's only view of a ``Reactor`` class).

    Attributes:
        name: the registered name.
        contract: the reactor's input contract.
        steps: step name -> bound :class:`StepSpec`, in definition order.
        dependencies: step name -> the steps it depends on (``result()``, ``wait_for``).
        returns: the step whose value is the run's value, or ``None`` (all results).
        redacted_arguments: step name -> its secret argument names (fed from a ``redact=True``
            reactor input, declared ``redact=True`` by the step or child reactor, or read from
            the elements of a map over a secret): sealed at rest and shown as
            ``"[REDACTED]"`` (docs/security.md, "What is encrypted").
        children: compose/map step name -> the child/element reactor's definition.
        coordination: the reactor-level ``with_*`` declarations
            (:mod:`reactor.dsl.coordination`).
        background: where the run moves to a worker (:mod:`reactor.dsl.background`), or
            ``None`` for a synchronous reactor.
        max_concurrency: how many of the run's independent leaf steps may run at the same
            time (docs/concepts.md, "Concurrency"); ``1`` (the default) runs every step one
            after another, in declaration order.
        deadline: each run's deadline in seconds from its start (docs/concepts.md, "Run
            deadlines"), or ``None``; ``run(deadline=...)`` overrides it.
        on_failure: ``"rollback"`` (default) or ``"pause"``: what a run does when a step
            fails after its retries (a step's own ``on_failure`` wins; docs/operations.md,
            "Pause, rewind, fork").
        version: the reactor's ``version`` label (docs/deploys.md, "Fingerprints"), or
            ``None``; stored with each run beside the definition's fingerprint.
    """

    name: str
    contract: InputContract
    steps: Mapping[str, StepSpec]
    dependencies: Mapping[str, tuple[str, ...]]
    returns: str | None = None
    redacted_arguments: Mapping[str, frozenset[str]] = field(default_factory=dict)
    children: Mapping[str, ReactorDefinition] = field(default_factory=dict)
    coordination: tuple[Coordination, ...] = ()
    background: Background | None = None
    max_concurrency: int = 1
    deadline: float | None = None
    on_failure: OnFailure = "rollback"
    version: str | None = None

    def pauses_on_failure(self, step: str) -> bool:
        """Whether a failure of step ``step`` holds the run before its rollback: the step's
        own ``on_failure``, else the reactor's (docs/operations.md, "Pause, rewind, fork").

        Args:
            step: a declared step name (an undeclared one follows the reactor's).

        Returns:
            ``True`` for ``"pause"``.
        """
        spec = self.steps.get(step)
        declared = spec.on_failure if spec is not None else None
        return (declared or self.on_failure) == "pause"

    def step(self, name: str) -> StepSpec:
        """The bound spec of step ``name``.

        Raises:
            KeyError: unknown step (only on engine bugs or tampered stored contexts; callers
                that read names from storage check membership first).
        """
        return self.steps[name]

    def register_codec_types(self) -> None:
        """Register with the codec every model/enum/dataclass input type of this reactor, its
        step classes (async units included), its interrupt payload schemas and its composed
        children and map elements (lazily, at the first run or when a stored value first
        needs one: a user's own registration made at import time wins; docs/concepts.md,
        "Decisions")."""
        self.contract.register_codec_types()
        for spec in self.steps.values():
            if spec.step_class is not None:
                spec.step_class.contract.register_codec_types()
            if spec.interrupt is not None:
                spec.interrupt.register_codec_types()
        for child in self.children.values():
            child.register_codec_types()

    def codec_types(self) -> Iterator[type[Any]]:
        """Yield every type :meth:`register_codec_types` registers (repeats possible)."""
        yield from self.contract.codec_types()
        for spec in self.steps.values():
            if spec.step_class is not None:
                yield from spec.step_class.contract.codec_types()
            if spec.interrupt is not None:
                yield from spec.interrupt.codec_types()
        for child in self.children.values():
            yield from child.codec_types()

    def register_codec_types_on_demand(self) -> None:
        """Make every type this reactor can store readable by this process before its first
        run: the default tag of each type of :meth:`codec_types` is announced with
        :func:`reactor.model.codec.register_on_demand`, so decoding a stored value that
        carries it (``Reactor.find``/``undo``/``retry``, the CLI, the dashboard, a worker)
        runs :meth:`register_codec_types` first. Called when the reactor class is created
        (docs/concepts.md, "Decisions")."""
        for tag in dict.fromkeys(codec.default_tag(tp) for tp in self.codec_types()):
            codec.register_on_demand(tag, self.register_codec_types)

    def interrupt_paths(self) -> tuple[str, ...]:
        """The step paths of every interrupt this reactor can pause at, in declaration order:
        its own interrupt steps (``"approval"``) and those of the children it composes,
        prefixed with the compose step's name (``"review.approval"``; docs/run-control.md,
        "Interrupts")."""
        paths: list[str] = []
        for name, spec in self.steps.items():
            if spec.kind == "interrupt":
                paths.append(name)
            elif spec.kind == "compose":
                paths.extend(f"{name}.{p}" for p in self.children[name].interrupt_paths())
        return tuple(paths)

    def sleep_paths(self) -> tuple[str, ...]:
        """The step paths of every ``sleep`` step this reactor can park at, its own and its
        composed children's (prefixed like :meth:`interrupt_paths`; docs/schedules.md,
        "Durable sleep")."""
        paths: list[str] = []
        for name, spec in self.steps.items():
            if spec.kind == "sleep":
                paths.append(name)
            elif spec.kind == "compose":
                paths.extend(f"{name}.{p}" for p in self.children[name].sleep_paths())
        return tuple(paths)

    def find_interrupt(self, path: str) -> tuple[ReactorDefinition, StepSpec] | None:
        """The interrupt at step path ``path`` (see :meth:`interrupt_paths`).

        Args:
            path: ``"<step>"`` or ``"<compose step>.<...>.<step>"``.

        Returns:
            ``(definition of the reactor declaring it, its spec)``, or ``None`` when no
            interrupt has that path.
        """
        head, _, rest = path.partition(".")
        spec = self.steps.get(head)
        if spec is None:
            return None
        if not rest:
            return (self, spec) if spec.kind == "interrupt" else None
        child = self.children.get(head) if spec.kind == "compose" else None
        return None if child is None else child.find_interrupt(rest)

    def redact_arguments(self, step: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` with the step's secret arguments replaced by ``"[REDACTED]"``
        (:func:`reactor.model.masking.mask_mapping`)."""
        return mask_mapping(arguments, self.redacted_arguments.get(step, frozenset()))

    def _secret_names(self, step: str, secret_inputs: Iterable[str]) -> frozenset[str]:
        """The step's declared secret arguments, plus those fed from ``secret_inputs`` (the
        run's secret input names: a composed child or map element inherits its parent's)."""
        declared = self.redacted_arguments.get(step, frozenset())
        spec = self.steps.get(step)
        extra = frozenset(secret_inputs) - self.contract.redacted
        if spec is None or not extra:
            return declared
        fed = {a for a, t in spec.arguments.items() if isinstance(t, InputRef) and t.name in extra}
        if isinstance(spec.source, InputRef) and spec.source.name in extra:
            fed |= {a for a, t in spec.arguments.items() if isinstance(t, ElementRef)}
        return declared | fed

    def secret_arguments(
        self, step: str, arguments: Mapping[str, Any], secret_inputs: Iterable[str] = ()
    ) -> list[str]:
        """The names among ``arguments`` that are secrets of step ``step``, sorted.

        Stored as the ``redacted`` list of the step's undo-stack entry and rollback record, so
        they are sealed at rest and masked in every view (docs/security.md, "What is
        encrypted"). Unknown steps have none.

        Args:
            step: the step name.
            arguments: its resolved arguments by name.
            secret_inputs: the run's secret input names (``Context.redacted``), which may
                exceed this reactor's ``redact=True`` inputs in a composed child or map element.
        """
        return sorted(self._secret_names(step, secret_inputs) & set(arguments))

    def child_redacted(self, step: str, secret_inputs: Iterable[str] = ()) -> list[str]:
        """The secret input names of the context started by compose or map step ``step``:
        the child reactor's ``redact=True`` inputs plus the step's secret arguments, sorted.

        Args:
            step: a compose or map step of this reactor.
            secret_inputs: the parent run's secret input names (``Context.redacted``).

        Raises:
            KeyError: ``step`` is not a compose or map step of this reactor.
        """
        child = self.children[step]
        return sorted(child.contract.redacted | self._secret_names(step, secret_inputs))


def _templates(spec: StepSpec) -> Iterable[tuple[str, Template]]:
    yield from spec.arguments.items()
    if spec.source is not None:
        yield "source", spec.source


def _wire(
    owner: str, name: str, spec: StepSpec, reactor_inputs: InputContract
) -> dict[str, Template]:
    """Return ``spec``'s arguments, completed by name-wiring against its declared contract."""
    contract: InputContract | None = None
    if spec.step_class is not None:
        contract = spec.step_class.contract
    elif spec.target is not None:
        contract = spec.target.definition.contract
    arguments = dict(spec.arguments)
    if contract is None:
        return arguments
    unknown = sorted(set(arguments) - contract.names)
    if unknown:
        raise DefinitionError(
            f"{owner}.{name}: {spec.label} declares no input(s) {unknown} "
            f"(declared: {sorted(contract.names)})"
        )
    for input_name, decl in contract.inputs.items():
        if input_name in arguments:
            continue
        if input_name in reactor_inputs.names:
            arguments[input_name] = InputRef(name=input_name)
        elif decl.required:
            raise DefinitionError(
                f"{owner}.{name}: required input {input_name!r} of {spec.label} is not wired "
                f"(pass {input_name}=input(...)/result(...)/value(...), or declare a reactor "
                f"input named {input_name!r})"
            )
    return arguments


def _check_templates(
    owner: str, name: str, spec: StepSpec, names: set[str], reactor_inputs: InputContract
) -> tuple[str, ...]:
    deps: list[str] = []
    sleeping = spec.sleep
    if sleeping is not None and sleeping.from_input is not None and (
        sleeping.from_input not in reactor_inputs.names
    ):  # as input(...): never satisfiable, refused now rather than when a run reaches it
        raise DefinitionError(
            f"{owner}.{name}: sleep(from_input={sleeping.from_input!r}) names no declared "
            f"reactor input (declared: {sorted(reactor_inputs.names)})"
        )
    for arg, template in _templates(spec):
        where = f"{owner}.{name} argument {arg!r}"
        if isinstance(template, ResultRef):
            if template.step == name:
                raise DefinitionError(f"{where}: a step cannot depend on its own result")
            if template.step not in names:
                raise DefinitionError(f"{where}: result({template.step!r}) names no step")
            deps.append(template.step)
        elif isinstance(template, InputRef):
            if template.name not in reactor_inputs.names:
                raise DefinitionError(
                    f"{where}: input({template.name!r}) names no declared reactor input"
                )
            if (spec.kind, arg) == ("interrupt", "correlation_id") and (
                template.name in reactor_inputs.redacted
            ):
                raise DefinitionError(
                    f"{where}: a correlation id is stored and shown in clear; it cannot be "
                    f"built from redact=True input {template.name!r}"
                )
        elif isinstance(template, ElementRef) and (
            spec.kind != "map" or template.map_step != name or arg == "source"
        ):
            raise DefinitionError(
                f"{where}: element({template.map_step!r}) is only valid in the args of map "
                f"step {template.map_step!r}"
            )
    for dep in spec.wait_for:
        if dep == name:
            raise DefinitionError(f"{owner}.{name}: wait_for names the step itself")
        if dep not in names:
            raise DefinitionError(f"{owner}.{name}: wait_for names no step ({dep!r})")
        deps.append(dep)
    return tuple(dict.fromkeys(deps))


def _check_cycles(owner: str, dependencies: Mapping[str, tuple[str, ...]]) -> None:
    state: dict[str, int] = {}  # 1 = visiting, 2 = done

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycle = [*path[path.index(node):], node]
            raise DefinitionError(f"{owner}: dependency cycle {' -> '.join(cycle)}")
        state[node] = 1
        for dep in dependencies[node]:
            visit(dep, [*path, node])
        state[node] = 2

    for node in dependencies:
        visit(node, [])


def build_definition(
    name: str,
    owner: str,
    contract: InputContract,
    specs: Mapping[str, StepSpec],
    returns: Any,
    coordination: tuple[Coordination, ...] = (),
) -> ReactorDefinition:
    """Validate and bind a reactor's declarations.

    Args:
        name: the registered reactor name.
        owner: the class's qualified name (for messages).
        contract: the reactor's input contract.
        specs: attribute name -> declared spec, in definition order.
        returns: the ``returns`` class attribute (a step name or ``None``).
        coordination: the reactor-level coordination (already normalized).

    Returns:
        The :class:`ReactorDefinition`.

    Raises:
        DefinitionError: see the module docstring.
    """
    names = set(specs)
    bound: dict[str, StepSpec] = {}
    dependencies: dict[str, tuple[str, ...]] = {}
    redacted: dict[str, frozenset[str]] = {}
    children: dict[str, ReactorDefinition] = {}
    for step_name, spec in specs.items():
        if step_name.startswith("_") or step_name in RESERVED_STEP_NAMES:
            raise DefinitionError(f"{owner}: step name {step_name!r} is reserved")
        arguments = _wire(owner, step_name, spec, contract)
        spec_bound = spec.bound(step_name, arguments)
        dependencies[step_name] = _check_templates(owner, step_name, spec_bound, names, contract)
        bound[step_name] = spec_bound
        secret = {
            arg for arg, t in arguments.items()
            if isinstance(t, InputRef) and t.name in contract.redacted
        }
        if (
            isinstance(spec.source, InputRef) and spec.source.name in contract.redacted
        ):  # a map over a secret: every argument read from its elements is secret too
            secret |= {arg for arg, t in arguments.items() if isinstance(t, ElementRef)}
        if spec.step_class is not None:
            secret |= spec.step_class.contract.redacted
        if spec.target is not None:
            children[step_name] = spec.target.definition
            secret |= spec.target.definition.contract.redacted
            paused = spec.target.definition.interrupt_paths() if spec.kind == "map" else ()
            sleeping = spec.target.definition.sleep_paths() if spec.kind == "map" else ()
            if sleeping:
                raise DefinitionError(
                    f"{owner}.{step_name}: the element reactor {spec.label} can sleep at "
                    f"{sleeping[0]!r}, but a map element cannot pause: move the sleep to the "
                    "reactor that declares the map (docs/schedules.md, \"Durable sleep\")"
                )
            if paused:
                raise DefinitionError(
                    f"{owner}.{step_name}: the element reactor {spec.label} can pause at "
                    f"interrupt {paused[0]!r}, but a map element cannot pause: move the "
                    "interrupt to the reactor that declares the map (docs/run-control.md, "
                    "\"Interrupts\")"
                )
        redacted[step_name] = frozenset(secret)
    _check_cycles(owner, dependencies)
    if returns is not None and (not isinstance(returns, str) or returns not in names):
        raise DefinitionError(f"{owner}: returns = {returns!r} names no step")
    if returns is not None and bound[returns].kind == "async_step":
        raise DefinitionError(
            f"{owner}: returns = {returns!r} names an async_step, whose result is not part of "
            "the run's value (read it with result() in a step instead)"
        )
    return ReactorDefinition(
        name=name,
        contract=contract,
        steps=bound,
        dependencies=dependencies,
        returns=returns,
        redacted_arguments=redacted,
        children=children,
        coordination=coordination,
    )


def attach_background(
    definition: ReactorDefinition, declared: Any, owner: str
) -> ReactorDefinition:
    """Validate a reactor's ``background`` class attribute and record it on its definition.

    Args:
        definition: the reactor's validated definition.
        declared: the ``background`` class attribute (``None`` for a synchronous reactor).
        owner: the class's qualified name (for messages).

    Returns:
        ``definition`` itself when ``declared`` is ``None``, else a copy whose ``background``
        is set.

    Raises:
        DefinitionError: ``declared`` is not a :class:`~reactor.dsl.background.Background`,
            or it names a step the reactor does not declare.
    """
    if declared is None:
        return definition
    if not isinstance(declared, Background):
        raise DefinitionError(
            f"{owner}: background must be a Background(...) declaration, got {declared!r}"
        )
    if declared.step is not None and declared.step not in definition.steps:
        raise DefinitionError(
            f"{owner}: {declared!r} names no step (steps: {', '.join(definition.steps)})"
        )
    return replace(definition, background=declared)


def attach_concurrency(
    definition: ReactorDefinition, declared: Any, owner: str
) -> ReactorDefinition:
    """Validate a reactor's ``max_concurrency`` class attribute and record it on its
    definition (docs/concepts.md, "Concurrency").

    Args:
        definition: the reactor's validated definition.
        declared: the ``max_concurrency`` class attribute: a positive ``int``.
        owner: the class's qualified name (for messages).

    Returns:
        ``definition`` itself when ``declared`` is ``1``, else a copy whose
        ``max_concurrency`` is set.

    Raises:
        DefinitionError: ``declared`` is not an ``int`` (a ``bool`` is not one) or is below 1.
    """
    if isinstance(declared, bool) or not isinstance(declared, int):
        raise DefinitionError(
            f"{owner}: max_concurrency must be a whole number of steps (1 or more), "
            f"got {declared!r}"
        )
    if declared < 1:
        raise DefinitionError(
            f"{owner}: max_concurrency must be 1 or more (1 runs one step at a time), "
            f"got {declared}"
        )
    return definition if declared == 1 else replace(definition, max_concurrency=declared)


def attach_on_failure(
    definition: ReactorDefinition, declared: Any, owner: str
) -> ReactorDefinition:
    """Validate a reactor's ``on_failure`` class attribute and record it on its definition
    (docs/operations.md, "Pause, rewind, fork").

    Args:
        definition: the reactor's validated definition.
        declared: the ``on_failure`` class attribute: ``"rollback"`` or ``"pause"``.
        owner: the class's qualified name (for messages).

    Returns:
        ``definition`` itself for ``"rollback"``, else a copy whose ``on_failure`` is set.

    Raises:
        DefinitionError: any other value.
    """
    value = checked_on_failure(declared, owner) or "rollback"
    return definition if value == "rollback" else replace(definition, on_failure=value)


#: The longest ``version`` label, in characters.
MAX_VERSION_LENGTH = 200


def attach_version(definition: ReactorDefinition, declared: Any, owner: str) -> ReactorDefinition:
    """Validate a reactor's ``version`` class attribute (a label such as ``"2024-06"``) and
    record it on its definition (docs/deploys.md, "Fingerprints").

    A ``version`` that is an :class:`~reactor.dsl.inputs.Input` or a step declaration is an
    input or a step of that name, not a label: ``declared`` is then ignored.

    Args:
        definition: the reactor's validated definition.
        declared: the ``version`` class attribute: ``None`` or a non-empty string of at most
            :data:`MAX_VERSION_LENGTH` printable characters.
        owner: the class's qualified name (for messages).

    Returns:
        ``definition`` itself when there is no label, else a copy whose ``version`` is set.

    Raises:
        DefinitionError: any other value.
    """
    if declared is None or isinstance(declared, Input | StepSpec):
        return definition
    if (
        not isinstance(declared, str)
        or not declared.strip()
        or len(declared) > MAX_VERSION_LENGTH
        or not declared.isprintable()
    ):
        raise DefinitionError(
            f"{owner}: version must be a non-empty printable string of at most "
            f"{MAX_VERSION_LENGTH} characters (a label such as '2024-06'), got {declared!r}"
        )
    return replace(definition, version=declared)


def attach_deadline(definition: ReactorDefinition, declared: Any, owner: str) -> ReactorDefinition:
    """Validate a reactor's ``deadline`` class attribute and record it on its definition
    (docs/concepts.md, "Run deadlines").

    Args:
        definition: the reactor's validated definition.
        declared: the ``deadline`` class attribute: ``None``, seconds or a ``timedelta``.
        owner: the class's qualified name (for messages).

    Returns:
        ``definition`` itself when no deadline is declared, else a copy whose ``deadline``
        is set (seconds).

    Raises:
        DefinitionError: see :func:`reactor.dsl.deadlines.declared_seconds`.
    """
    seconds = declared_seconds(declared, owner)
    return definition if seconds is None else replace(definition, deadline=seconds)
