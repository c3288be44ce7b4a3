output "table_name" {
  value = aws_dynamodb_table.rate_limits.name
}

output "table_arn" {
  value = aws_dynamodb_table.rate_limits.arn
}

output "stream_arn" {
  value = aws_dynamodb_table.rate_limits.stream_arn
}

output "aggregator_function_arn" {
  value = aws_lambda_function.aggregator.arn
}

output "namespace_policy_arns" {
  value = { for ns, p in aws_iam_policy.namespace : ns => p.arn }
}
