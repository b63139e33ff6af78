"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) at Kafka 3.9.1's versions (0-3), as
Kafka's AclApis answers them in ZooKeeper mode:

  - no authorizer: every result SECURITY_DISABLED "No Authorizer is configured.";
  - DescribeAcls needs DESCRIBE on the cluster, Create/DeleteAcls ALTER (else
    CLUSTER_AUTHORIZATION_FAILED for the request);
  - a filter or creation with an UNKNOWN enum, or v0 with a non-literal pattern type, fails to
    parse in Kafka (CreateAclsRequest.validate...): the connection is closed;
  - a creation naming the cluster other than `kafka-cluster`, with an empty name or a '/' in it
    is INVALID_REQUEST; one Kafka's AclBinding refuses (type ANY, pattern MATCH/ANY, operation
    or permission ANY, a principal that is not TYPE:NAME) fails every creation of the request
    with UNKNOWN_SERVER_ERROR and no message.
(Checked against Kafka 3.9.1 with `realkafka` and the project's codec; a success carries ""
as its message in Create/DescribeAcls, null in DeleteAcls, as Kafka's.)
"""

from __future__ import annotations

from typing import Any

from kafkasim.broker.api_registry import ApiRegistry, CloseConnection
from kafkasim.broker.request_context import context_of
from kafkasim.broker.security.acl_types import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    enum_or_unknown,
)
from kafkasim.broker.security.authorizer import AclAuthorizer
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kafkasim.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kafkasim.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message

VERSIONS = {A.DESCRIBE_ACLS: (0, 3), A.CREATE_ACLS: (0, 3), A.DELETE_ACLS: (0, 3)}
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."


class AclRequestError(Exception):
    """A request Kafka refuses as a whole: (error code, message or None)."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _filter(version: int, f: Any) -> AclBindingFilter:
    flt = AclBindingFilter(
        enum_or_unknown(ResourceType, f.resource_type_filter),  # type: ignore[arg-type]
        f.resource_name_filter, enum_or_unknown(PatternType, f.pattern_type_filter),  # type: ignore[arg-type]
        f.principal_filter, f.host_filter, enum_or_unknown(AclOperation, f.operation),  # type: ignore[arg-type]
        enum_or_unknown(AclPermissionType, f.permission_type))  # type: ignore[arg-type]
    if version == 0 and flt.pattern_type != PatternType.LITERAL:
        raise CloseConnection("Version 0 only supports literal resource pattern types")
    if 0 in (flt.resource_type, flt.pattern_type, flt.operation, flt.permission_type):
        raise CloseConnection("Filter contain UNKNOWN elements")
    return flt


def _binding_enums(version: int, c: Any) -> tuple[Any, Any, Any, Any]:
    """CreateAclsRequest.validate: a v0 non-literal pattern or an UNKNOWN enum fails to parse."""
    rtype = enum_or_unknown(ResourceType, c.resource_type)
    ptype = enum_or_unknown(PatternType, c.resource_pattern_type)
    op = enum_or_unknown(AclOperation, c.operation)
    perm = enum_or_unknown(AclPermissionType, c.permission_type)
    if version == 0 and ptype != PatternType.LITERAL:
        raise CloseConnection("Version 0 only supports literal resource pattern types")
    if 0 in (rtype, ptype, op, perm):
        raise CloseConnection("CreatableAcls contain unrecognized enums")
    return rtype, ptype, op, perm


def _binding(version: int, c: Any) -> AclBinding:
    """CreateAclsRequest.aclBinding: what Kafka's constructors refuse fails the whole request."""
    rtype, ptype, op, perm = _binding_enums(version, c)
    kind, sep, _ = c.principal.partition(":")
    if rtype == ResourceType.ANY or ptype in (PatternType.MATCH, PatternType.ANY) or op == AclOperation.ANY \
            or perm == AclPermissionType.ANY or not sep or not kind:
        raise AclRequestError(E.UNKNOWN_SERVER_ERROR, None)
    return AclBinding(ResourcePattern(ResourceType(rtype), c.resource_name, PatternType(ptype)),
                      AccessControlEntry(c.principal, c.host, AclOperation(op), AclPermissionType(perm)))


def _creation_error(b: AclBinding) -> tuple[int, str] | None:
    if b.pattern.resource_type == ResourceType.CLUSTER and b.pattern.name != CLUSTER_NAME:
        return E.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.pattern.name:
        return E.INVALID_REQUEST, "Invalid empty resource name"
    if "/" in b.pattern.name:   # not a znode name (AclAuthorizer: InvalidRequestException)
        return E.INVALID_REQUEST, "Failed to create ACL"
    return None


def not_authorized_message(header: RequestHeader) -> str:
    """AuthHelper.authorizeClusterOperation's ClusterAuthorizationException text, which names
    Kafka's RequestChannel.Request (its connection id is this side's own)."""
    ctx = context_of(header)
    return (f"Request Request(processor=0, connectionId={ctx.client_address}-0, "
            f"session=Session({ctx.principal},/{ctx.client_address}), listenerName=ListenerName({ctx.listener_name}), "
            f"securityProtocol={ctx.security_protocol}, buffer=null, envelope=None) is not authorized.")


class AclApis:
    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    def _allowed(self, header: RequestHeader, op: AclOperation) -> bool:
        auth = self.authorizer
        return auth is None or auth.authorize(context_of(header), op, ResourceType.CLUSTER, CLUSTER_NAME)

    async def handle_describe(self, header: RequestHeader, req: DescribeAclsRequest) -> Message:
        flt = _filter(header.request_api_version, req)
        if self.authorizer is None:
            return DescribeAclsResponse(error_code=E.SECURITY_DISABLED, error_message=SECURITY_DISABLED_MESSAGE,
                                        resources=[])
        if not self._allowed(header, AclOperation.DESCRIBE):
            return DescribeAclsResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                        error_message=not_authorized_message(header), resources=[])
        R = DescribeAclsResponse.DescribeAclsResource
        grouped: dict[ResourcePattern, list[Any]] = {}
        for b in self.authorizer.acls(flt):
            e = b.entry
            grouped.setdefault(b.pattern, []).append(R.AclDescription(
                principal=e.principal, host=e.host, operation=int(e.operation), permission_type=int(e.permission_type)))
        return DescribeAclsResponse(error_code=E.NONE, error_message="", resources=[
            R(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type), acls=acls)
            for p, acls in grouped.items()])

    async def handle_create(self, header: RequestHeader, req: CreateAclsRequest) -> Message:
        """The cluster check, then no-authorizer, then the bindings (AclApis.handleCreateAcls)."""
        R = CreateAclsResponse.AclCreationResult
        for c in req.creations:   # what fails to parse closes the connection before anything
            _binding_enums(header.request_api_version, c)
        if self.authorizer is None or not self._allowed(header, AclOperation.ALTER):
            code, msg = (E.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE) if self.authorizer is None \
                else (E.CLUSTER_AUTHORIZATION_FAILED, not_authorized_message(header))
            return CreateAclsResponse(results=[R(error_code=code, error_message=msg) for _ in req.creations])
        try:
            bindings = [_binding(header.request_api_version, c) for c in req.creations]
        except AclRequestError as exc:
            return CreateAclsResponse(results=[R(error_code=exc.code, error_message=exc.message)
                                               for _ in req.creations])
        errors = [_creation_error(b) for b in bindings]
        await self.authorizer.create_acls(b for b, err in zip(bindings, errors, strict=True) if err is None)
        return CreateAclsResponse(results=[R(error_code=E.NONE, error_message="") if err is None
                                           else R(error_code=err[0], error_message=err[1]) for err in errors])

    async def handle_delete(self, header: RequestHeader, req: DeleteAclsRequest) -> Message:
        F = DeleteAclsResponse.DeleteAclsFilterResult
        filters = [_filter(header.request_api_version, f) for f in req.filters]
        if self.authorizer is None or not self._allowed(header, AclOperation.ALTER):
            code, msg = (E.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE) if self.authorizer is None \
                else (E.CLUSTER_AUTHORIZATION_FAILED, not_authorized_message(header))
            return DeleteAclsResponse(filter_results=[F(error_code=code, error_message=msg, matching_acls=[])
                                                      for _ in filters])
        deleted = await self.authorizer.delete_acls(filters)
        M = F.DeleteAclsMatchingAcl
        return DeleteAclsResponse(filter_results=[F(error_code=E.NONE, error_message=None, matching_acls=[
            M(error_code=E.NONE, error_message=None, resource_type=int(b.pattern.resource_type),
              resource_name=b.pattern.name, pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal,
              host=b.entry.host, operation=int(b.entry.operation), permission_type=int(b.entry.permission_type))
            for b in bindings]) for bindings in deleted])


def register(apis: ApiRegistry, h: AclApis) -> None:
    apis.register(A.DESCRIBE_ACLS, *VERSIONS[A.DESCRIBE_ACLS], h.handle_describe)
    apis.register(A.CREATE_ACLS, *VERSIONS[A.CREATE_ACLS], h.handle_create)
    apis.register(A.DELETE_ACLS, *VERSIONS[A.DELETE_ACLS], h.handle_delete)
