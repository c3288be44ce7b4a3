variable "table_name" {
  description = "Name of the limiter's DynamoDB table."
  type        = string
  default     = "rate-limits"
}

variable "package" {
  description = "Path of the aggregator's deployment package (aggregator.zip holding bootstrap built from cmd/aggregator)."
  type        = string
  default     = "aggregator.zip"
}

variable "aggregator_windows" {
  description = "Usage snapshot windows: any of hourly, daily, monthly."
  type        = string
  default     = "hourly,daily"
}

variable "log_retention_days" {
  description = "How long the aggregator's logs are kept."
  type        = number
  default     = 30
}

variable "namespaces" {
  description = "Namespaces to create a data-plane policy for (aws_iam_policy.namespace[ns]), each confined to its own items."
  type        = list(string)
  default     = []
}
